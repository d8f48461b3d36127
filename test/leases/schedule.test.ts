import { describe, expect, it } from 'vitest';
import { Cooldown, HANDOVER_LOOK_MS, nextScanDelay, onRenewalGrid, RenewalPhases, type ScanOutcome } from '../../src/leases/coordinator/schedule.js';
import { LEASE_DEFAULTS } from '../../src/leases/coordinator/options.js';
import { resolveTimings } from '../../src/leases/protocol/index.js';

const t = resolveTimings(LEASE_DEFAULTS);
const NOW = 1_000_000;
const quiet: ScanOutcome = { nextExpiryMs: undefined, awaiting: 0, settled: false, justCreated: false };

describe('nextScanDelay (when the next balancing round runs)', () => {
  it('scans every acquire interval while the share moves, every half expiration once settled', () => {
    expect(nextScanDelay(quiet, NOW, 0, t)).toEqual({ delayMs: LEASE_DEFAULTS.leaseAcquireIntervalMs, lookMs: 0 });
    expect(nextScanDelay({ ...quiet, settled: true }, NOW, 0, t)).toEqual({ delayMs: LEASE_DEFAULTS.leaseExpirationMs / 2, lookMs: 0 });
  });

  it('looks again soon after creating the leases, even when settled (other hosts ask for their share)', () => {
    expect(nextScanDelay({ ...quiet, settled: true, justCreated: true }, NOW, 0, t).delayMs).toBe(t.acquireMs);
  });

  it('never scans later than the moment a lease held elsewhere could expire (failover in one expiration)', () => {
    expect(nextScanDelay({ ...quiet, settled: true, nextExpiryMs: NOW + 5_000 }, NOW, 0, t).delayMs).toBe(5_001);
    // An expiry already past: at once, but never a zero-delay spin.
    expect(nextScanDelay({ ...quiet, nextExpiryMs: NOW - 10 }, NOW, 0, t).delayMs).toBe(1);
  });

  it('while waiting for a handover, looks after 1 s, 2 s, 4 s … up to the acquire interval, and stops once nothing is awaited', () => {
    const waiting = { ...quiet, awaiting: 1 };
    const looks: number[] = [];
    let lookMs = 0;
    for (let round = 0; round < 6; round++) {
      ({ lookMs } = nextScanDelay(waiting, NOW, lookMs, t));
      looks.push(lookMs);
    }
    expect(looks).toEqual([HANDOVER_LOOK_MS, 2_000, 4_000, 8_000, t.acquireMs, t.acquireMs]);
    expect(nextScanDelay(quiet, NOW, lookMs, t)).toEqual({ delayMs: t.acquireMs, lookMs: 0 });
    // An expiry sooner than the next look still wins.
    expect(nextScanDelay({ ...waiting, nextExpiryMs: NOW + 300 }, NOW, 0, t).delayMs).toBe(301);
  });
});

describe('onRenewalGrid (renewals due close together go out together)', () => {
  it('moves a renewal back onto the grid, never later and at most one grid step earlier', () => {
    const grid = t.renewGridMs;
    expect(grid).toBe(1_000);
    for (const now of [0, 1, 499, 999, 1_000, 123_456]) {
      for (const delay of [2_000, 2_001, 39_999, 40_000]) {
        const onGrid = onRenewalGrid(now, delay, grid);
        expect((now + onGrid) % grid).toBe(0);
        expect(onGrid).toBeLessThanOrEqual(delay);
        expect(delay - onGrid).toBeLessThan(grid);
      }
    }
    // Two renewals due 0.3 s apart fall in the same instant.
    expect(NOW + 100 + onRenewalGrid(NOW + 100, 40_000, grid)).toBe(NOW + 400 + onRenewalGrid(NOW + 400, 40_000, grid));
  });

  it('leaves short delays (retries, tests with short timings) alone', () => {
    expect(onRenewalGrid(NOW + 123, 1_999, 1_000)).toBe(1_999);
    expect(onRenewalGrid(NOW + 123, 10, 1_000)).toBe(10);
  });
});

describe('RenewalPhases (first renewals of leases taken together are spread)', () => {
  it('starts at a full interval, then spreads over the interval by golden-ratio steps, never below a tenth', () => {
    const phases = new RenewalPhases(40_000);
    const delays = Array.from({ length: 20 }, () => phases.next());
    expect(delays[0]).toBe(40_000);
    for (const d of delays) {
      expect(d).toBeGreaterThanOrEqual(4_000);
      expect(d).toBeLessThanOrEqual(40_000);
    }
    // Ten leases taken together: no two first renewals within 1.5 s (of 40 s) of each other.
    const sorted = delays.slice(0, 10).sort((a, b) => a - b);
    for (let i = 1; i < sorted.length; i++) expect(sorted[i]! - sorted[i - 1]!).toBeGreaterThan(1_500);
  });
});

describe('Cooldown (leases this host let go are left to others a while)', () => {
  it('holds a lease until its time, then forgets it', () => {
    const cooldown = new Cooldown();
    cooldown.leave('p.1', NOW + 26_000);
    expect(cooldown.holds('p.1', NOW)).toBe(true);
    expect(cooldown.holds('p.1', NOW + 25_999)).toBe(true);
    expect(cooldown.holds('p.1', NOW + 26_000)).toBe(false);
    // Forgotten: an earlier clock reading no longer holds it.
    expect(cooldown.holds('p.1', NOW)).toBe(false);
    expect(cooldown.holds('p.2', NOW)).toBe(false);
  });

  it('a later leave replaces the earlier one', () => {
    const cooldown = new Cooldown();
    cooldown.leave('p.1', NOW + 60_000);
    cooldown.leave('p.1', NOW + 1_000);
    expect(cooldown.holds('p.1', NOW + 2_000)).toBe(false);
  });
});
