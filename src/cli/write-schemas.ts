/** `npm run schemas`: writes the native line JSON Schemas into docs/schemas/ (line-schemas.ts). */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { lineJsonSchemas } from '../schemas/line-schemas.ts'

const dir = join(import.meta.dir, '..', '..', 'docs', 'schemas')
for (const [name, schema] of Object.entries(lineJsonSchemas())) {
  writeFileSync(join(dir, name), `${JSON.stringify(schema, null, 2)}\n`)
  console.log(`wrote docs/schemas/${name}`)
}
