/** The provider gate contract on the in-process gate (one instance's bound, no Redis). */
import { runGateContract } from './gate-contract.ts'
import { makeInProcessGate } from './gates.ts'

runGateContract('in process', makeInProcessGate)
