import { describe, expect, it, vi } from 'vitest';
import { main } from '../../examples/memory-demo.js';

describe('examples/memory-demo.ts', () => {
  // Real time (the demo is a real-time program), kept to about two seconds.
  it('runs briefly, shuts down cleanly and finds every order processed', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    try {
      const ok = await main(['--duration-ms', '1200', '--orders-per-second', '1000']);
      const lines = log.mock.calls.map((c) => String(c[0]));
      expect(lines.at(-1)).toMatch(/^check: OK: \d+ written/);
      expect(ok).toBe(true);
    } finally {
      log.mockRestore();
    }
  });
});
