/** Status code names the service puts in the `code` field of an error body. */
const CODE_NAMES: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  408: 'RequestTimeout',
  409: 'Conflict',
  410: 'Gone',
  412: 'PreconditionFailed',
  413: 'RequestEntityTooLarge',
  429: 'TooManyRequests',
  500: 'InternalServerError',
  503: 'ServiceUnavailable',
};

/** Substatus codes the SDK reacts to. */
export const SUBSTATUS = {
  partitionKeyMismatch: 1001,
  partitionKeyRangeGone: 1002,
  completingSplit: 1007,
  completingPartitionMigration: 1008,
  throttled: 3200,
} as const;

/**
 * A failure the emulator answers with an HTTP error: the status, an optional `x-ms-substatus` and the JSON
 * body `{code, message}` that the SDK needs to build its `ErrorResponse`.
 */
export class CosmosHttpError extends Error {
  readonly code: string;

  constructor(
    readonly status: number,
    message: string,
    readonly substatus?: number,
    readonly headers: Record<string, string> = {},
    /** More fields of the JSON error body, e.g. `additionalErrorInfo`. */
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'CosmosHttpError';
    this.code = CODE_NAMES[status] ?? `Status${status}`;
  }
}

/** The status and JSON body for an error the emulator did not raise on purpose. */
export function internalError(err: unknown): CosmosHttpError {
  return new CosmosHttpError(500, `emulator failure: ${err instanceof Error ? err.message : String(err)}`);
}
