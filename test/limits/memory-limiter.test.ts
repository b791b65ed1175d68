/** The rate limiter contract on the in-process limiter (the embedded default, and Redis's fallback). */
import { createMemoryLimiter } from '../../src/limits/rate-limiter.ts'
import { runLimiterContract } from './contract.ts'

runLimiterContract('memory', async (now) => createMemoryLimiter(now))
