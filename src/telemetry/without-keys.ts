/**
 * A request's path as logs and spans show it: anything shaped like an API key (`mg_` and 43
 * base64url characters, src/auth/keys.ts) cut to `mg_…`, so a key pasted into a URL by mistake
 * never reaches them. A path without `mg_` is returned as it is, at the cost of one search.
 */
const KEY_IN_TEXT = /mg_[A-Za-z0-9_-]{16,}/g

export const withoutKeys = (text: string): string =>
  text.includes('mg_') ? text.replace(KEY_IN_TEXT, 'mg_…') : text
