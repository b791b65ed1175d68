/**
 * The two-thread file validator as the split-validation tests use it: every file split (no size
 * threshold), each verdict's path (and why, when the thread failed) recorded, beside the catalog a one-pass validateBatchFile needs.
 * The caller closes `validator` when its tests are done.
 */
import { createCatalog } from '../../src/catalog/catalog.ts'
import { loadConfig } from '../../src/config.ts'
import { createFileValidator, type ValidationPath } from '../../src/ingest/parallel-validation.ts'
import { testCatalog, writeCatalog } from './catalog.ts'

export function splitValidator(
  catalogFile: unknown = testCatalog({ openai: 'http://127.0.0.1:9/v1' }),
) {
  const config = loadConfig({ MULTIGRID_CONFIG: writeCatalog(catalogFile) })
  const catalog = createCatalog(config.catalog, config.providerKeys)
  const paths: ValidationPath[] = []
  const reasons: (string | undefined)[] = []
  const validator = createFileValidator(catalog, config, {
    minParallelBytes: 0,
    parallel: true,
    observe: (how, why) => {
      paths.push(how)
      reasons.push(why)
    },
  })
  return { config, catalog, validator, paths, reasons }
}
