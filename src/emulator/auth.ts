import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The resource type and id the SDK signs for a path: for a feed (`/dbs`, `…/colls/c/docs`, an odd number of
 * segments) the last segment and the parent link; for a resource (`…/docs/id`) the type segment and the full
 * link; for `/` both empty.
 */
function signedResource(segments: readonly string[]): [type: string, id: string] {
  if (segments.length === 0) return ['', ''];
  // Offers are signed by their lower-cased id alone.
  if (segments[0] === 'offers' && segments.length === 2) return ['offers', segments[1]!.toLowerCase()];
  if (segments.length % 2 === 1) return [segments[segments.length - 1]!, segments.slice(0, -1).join('/')];
  return [segments[segments.length - 2]!, segments.join('/')];
}

function signature(key: Buffer, method: string, type: string, id: string, date: string): Buffer {
  const payload = `${method.toLowerCase()}\n${type.toLowerCase()}\n${id}\n${date.toLowerCase()}\n\n`;
  return createHmac('sha256', key).update(payload, 'utf8').digest();
}

/**
 * True when the `authorization` header is a master-key signature of this request under `masterKey`
 * (`type=master&ver=1.0&sig=<base64 HMAC-SHA256>`, URL-encoded). The SDK signs the decoded ids (names
 * with spaces or accents as they are), not the percent-encoded path.
 */
export function isAuthorized(
  masterKey: string,
  method: string,
  decodedSegments: readonly string[],
  authorization: string | undefined,
  date: string | undefined,
): boolean {
  if (authorization === undefined || date === undefined) return false;
  let decoded: string;
  try {
    decoded = decodeURIComponent(authorization);
  } catch {
    return false;
  }
  // Split by hand: URLSearchParams would turn the '+' of base64 into spaces.
  const fields = new Map(decoded.split('&').map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
  const sent = Buffer.from(fields.get('sig') ?? '', 'base64');
  if (fields.get('type') !== 'master' || sent.length === 0) return false;
  const key = Buffer.from(masterKey, 'base64');
  const expected = signature(key, method, ...signedResource(decodedSegments), date);
  return expected.length === sent.length && timingSafeEqual(expected, sent);
}
