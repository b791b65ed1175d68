/** The providers' batch APIs (docs/batch-lanes.md): one client a kind and the mapping of their results. */
export type * from './types.ts'
export {
  anthropicBatchInput,
  createAnthropicBatchClient,
  type AnthropicBatchClient,
  type AnthropicBatchSummary,
  type AnthropicBatchInput,
} from './anthropic-batch-client.ts'
export { mapAnthropicBatchResults } from './map-anthropic-batch-results.ts'
export { mapOpenAIBatchOutput } from './map-openai-batch-output.ts'
export {
  createOpenAIBatchClient,
  openAIBatchInput,
  type OpenAIBatchClient,
} from './openai-batch-client.ts'
export { upstreamIdOf, positionOf } from './batch-http.ts'
