/**
 * The provider concurrency gates under test, by name: the only file of the gate contract that
 * knows where the gates live and how each is made, so moving them (issue 15 item 2 puts them in
 * src/upstream/) or changing how they are built changes this file alone.
 */
import { randomBytes } from 'node:crypto'
import { connectRedis } from '../../src/coordination/redis.ts'
import { createAdaptiveGate } from '../../src/upstream/adaptive-gate.ts'
import { createFleetGates } from '../../src/upstream/fleet-gate.ts'
import { createProviderGate, type ProviderGate } from '../../src/upstream/provider-gate.ts'
import type { Logger } from '../../src/telemetry/logger.ts'

/** What the contract holds every gate to. */
export type { ProviderGate }

/** A gate made for one test, and how to let go of what it holds. */
export interface MadeGate {
  gate: ProviderGate
  close(): Promise<void>
}

export type MakeGate = (limit: number) => Promise<MadeGate>

/** The in-process gate: one instance's bound on one provider. */
export const makeInProcessGate: MakeGate = async (limit) => ({
  gate: createProviderGate(limit),
  close: async () => {},
})

/** The fleet-wide gate on Redis: each gate made is one instance, on a provider of its own. */
export function fleetGateMaker(options: {
  redisUrl: string
  prefix: string
  logger: Logger
}): MakeGate {
  return async (limit) => {
    const redis = await connectRedis(options.redisUrl)
    const gates = createFleetGates(redis, {
      instance: `inst_${randomBytes(4).toString('hex')}`,
      ttlMs: 5_000,
      logger: options.logger,
      prefix: options.prefix,
    })
    const close = async () => {
      await gates.close()
      redis.disconnect()
    }
    return { gate: gates.gate(`provider_${randomBytes(4).toString('hex')}`, limit), close }
  }
}

/**
 * An adaptive provider's gate (adaptive-gate.ts) in front of a gate `make` makes, its working
 * limit at the full limit: the composition must keep the contract of the gate behind it.
 */
export function adaptiveOver(make: MakeGate): MakeGate {
  return async (limit) => {
    const made = await make(limit)
    return { gate: createAdaptiveGate(made.gate, () => limit), close: made.close }
  }
}
