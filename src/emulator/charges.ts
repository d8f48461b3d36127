/**
 * Request charges (RU) modelled on the service's published costs, so throttling tests and RU budgets see
 * realistic numbers in `x-ms-request-charge`:
 * - a point read of a 1 KB document costs 1 RU, plus 0.1 RU per further KB;
 * - a create, replace, upsert, patch or delete of a 1 KB document costs about 5.7 RU (default indexing),
 *   plus 0.5 RU per further KB;
 * - a query costs 2.3 RU, plus 0.02 RU per document it looked at and 0.1 RU per KB it returns;
 * - a change feed page costs 2 RU plus 0.1 RU per KB it returns; an empty poll (304) costs 1 RU;
 * - metadata (account, databases, containers, ranges, offers) costs 1 RU; errors cost nothing.
 */
export const CHARGES = {
  readBase: 1,
  writeBase: 5.71,
  perExtraKbRead: 0.1,
  perExtraKbWrite: 0.5,
  queryBase: 2.31,
  perDocumentScanned: 0.02,
  perKbReturned: 0.1,
  changeFeedPage: 2,
  changeFeedEmpty: 1,
  metadata: 1,
} as const;

function kb(bytes: number): number {
  return Math.max(1, bytes / 1024);
}

function round(ru: number): number {
  return Math.round(ru * 100) / 100;
}

/** RU of a point read returning `bytes` of JSON. */
export function readCharge(bytes: number): number {
  return round(CHARGES.readBase + (kb(bytes) - 1) * CHARGES.perExtraKbRead);
}

/** RU of a write (create, replace, upsert, patch, delete) of a document of `bytes`. */
export function writeCharge(bytes: number): number {
  return round(CHARGES.writeBase + (kb(bytes) - 1) * CHARGES.perExtraKbWrite);
}

/** RU of a query page that looked at `scanned` documents and returns `bytes` of JSON. */
export function queryCharge(scanned: number, bytes: number): number {
  return round(CHARGES.queryBase + scanned * CHARGES.perDocumentScanned + (bytes / 1024) * CHARGES.perKbReturned);
}

/** RU of a change feed page returning `bytes` of JSON (0 for an empty poll). */
export function changeFeedCharge(bytes: number): number {
  return bytes === 0 ? CHARGES.changeFeedEmpty : round(CHARGES.changeFeedPage + (bytes / 1024) * CHARGES.perKbReturned);
}

/** The JSON size of a value in bytes, as the charge model counts it. */
export function jsonBytes(value: unknown): number {
  return value === undefined ? 0 : Buffer.byteLength(JSON.stringify(value));
}
