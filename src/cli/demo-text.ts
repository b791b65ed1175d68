/** What `npm run demo` prints once both servers listen: where they are, the key, lines to paste. */
export interface DemoInfo {
  url: string
  simulatorUrl: string
  dataDir: string
  accountId: string
  creditUsd: string
  key: string
  adminToken: string
}

export function demoText(info: DemoInfo): string {
  const body = JSON.stringify({
    model: 'openai/gpt-5-nano',
    messages: [{ role: 'user', content: 'Say hello in five words.' }],
    max_tokens: 64,
  })
  return [
    `Multigrid demo: the gateway on ${info.url}, on the upstream simulator at ${info.simulatorUrl}`,
    `(every model of providers/catalog.simulator.json, at list prices; store in ${info.dataDir}).`,
    '',
    `account  ${info.accountId}  ($${info.creditUsd} of credit)`,
    `key      ${info.key}`,
    '',
    'In another shell:',
    `  export MULTIGRID_URL=${info.url}`,
    `  export MULTIGRID_API_KEY=${info.key}`,
    `  export MULTIGRID_ADMIN_TOKEN=${info.adminToken}`,
    // So that `npm run mg -- …` there works on this demo's store, not a new one under ./data.
    `  export MULTIGRID_DATA_DIR=${info.dataDir}`,
    `  curl -s ${info.url}/v1/chat/completions -H "Authorization: Bearer ${info.key}" -H 'Content-Type: application/json' -d '${body}'`,
    '',
    `Dashboard: ${info.url}/ (sign in with the key). Ctrl-C stops both.`,
  ].join('\n')
}
