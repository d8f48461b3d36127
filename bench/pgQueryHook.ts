// Role: watches every query a `pg` client sends (bench only): `onQuery` is told when one is sent and returns
// what to call when its reply comes (callback form, as pg-pool uses, or promise form).
import pg from 'pg';

/** Patches `pg.Client.prototype.query` once: `onQuery(client, args)` at the send, its result at the reply. */
export function watchPgQueries<C>(onQuery: (client: C, args: readonly unknown[]) => () => void): void {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: C, ...args: unknown[]) {
    const note = onQuery(this, args);
    const last = args.length - 1;
    const callback = args[last];
    if (typeof callback === 'function') {
      // pg-pool passes a callback (the pool's own query): note when it is called.
      args[last] = (...cbArgs: unknown[]) => {
        note();
        return (callback as (...a: unknown[]) => unknown)(...cbArgs);
      };
      return original.apply(this, args);
    }
    const result = original.apply(this, args) as Promise<unknown>;
    if (result && typeof result.then === 'function') void result.then(note, note);
    return result;
  };
}
