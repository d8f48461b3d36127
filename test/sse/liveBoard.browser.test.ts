import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'puppeteer-core';
import puppeteer from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toCard, type OrderCard } from '../../examples/live-board/orders.js';
import { startLiveBoard, type LiveBoard } from '../../examples/live-board/server.js';

/** Debian's `chromium` (or `CHROMIUM_PATH`): never a downloaded browser build. */
function findChromium(): string | undefined {
  if (process.env.CHROMIUM_PATH) return process.env.CHROMIUM_PATH;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    for (const name of ['chromium', 'chromium-browser']) {
      if (dir && existsSync(join(dir, name))) return join(dir, name);
    }
  }
  return undefined;
}

const chromium = findChromium();
const SCREENSHOT = fileURLToPath(new URL('../../examples/live-board/screenshot.png', import.meta.url));
if (!chromium) {
  const reason = 'no chromium on PATH (apt-get install chromium, or set CHROMIUM_PATH)';
  if (process.env.CI === 'true') throw new Error(`the live-board browser test is required under CI=true, but there is ${reason}`);
  console.warn(`skipping the live-board browser test: ${reason}`);
}

interface PageBoard {
  orders: Map<string, OrderCard>;
  received: string[];
  snapshots: number;
  reconnects: number;
  ready: boolean;
  stale: number;
  lastEventId: string;
}
declare const window: { board: PageBoard };
declare const document: { querySelectorAll(selector: string): { length: number } };

const sorted = (orders: Record<string, OrderCard>) => JSON.stringify(Object.entries(orders).sort(([a], [b]) => (a < b ? -1 : 1)));

describe.skipIf(!chromium)('examples/live-board in headless Chromium: snapshot, then live, across cuts and a server restart', () => {
  let board: LiveBoard;
  let browser: Browser;
  let page: Page;
  let profile: string;

  beforeAll(async () => {
    board = await startLiveBoard({ port: 0, rate: 0, ranges: 2, heartbeatMs: 1_000 });
    profile = mkdtempSync(join(tmpdir(), 'rxfeed-chromium-'));
    browser = await puppeteer.launch({
      executablePath: chromium,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--disable-dev-shm-usage',
        `--user-data-dir=${profile}`,
      ],
    });
    page = await browser.newPage();
    await page.setViewport({ width: 1360, height: 820 });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await board?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  /** Polls `check` every 50 ms until it holds (puppeteer's waitForFunction never resolved under vitest here; evaluate does). */
  async function until(check: () => Promise<boolean>, limitMs = 30_000): Promise<void> {
    for (const start = Date.now(); !(await check()); ) {
      if (Date.now() - start > limitMs) throw new Error(`the page did not get there within ${limitMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  const pageOrders = () => page.evaluate(() => Object.fromEntries(window.board.orders) as Record<string, OrderCard>);
  const pageState = () =>
    page.evaluate(() => {
      const { received, snapshots, reconnects, ready, stale, lastEventId } = window.board;
      return { received, snapshots, reconnects, ready, stale, lastEventId };
    });
  const viewRows = async () => Object.fromEntries((await board.view.rows()).map((r) => [r.key, r.row]));
  /** What the writer's own records say the board should show. */
  const written = () => Object.fromEntries([...board.writer.openOrders()].map(([id, order]) => [id, toCard(order)]));

  /** Orders keep arriving (a step every ~25 ms) until the returned function is called. */
  function keepWriting(): () => Promise<void> {
    let on = true;
    const loop = (async () => {
      while (on) {
        await board.writer.step();
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    })();
    return async () => {
      on = false;
      await loop;
    };
  }

  it('opens mid-stream, survives a cut and a restart with orders arriving, and ends equal to the view with no gap or duplicate', { timeout: 120_000 }, async () => {
    for (let i = 0; i < 12; i++) await board.writer.create();
    const stop = keepWriting();
    await page.goto(board.url);
    await until(() => page.evaluate(() => window.board?.ready === true));
    expect((await pageState()).snapshots).toBe(1);

    await until(async () => (await pageState()).received.length >= 10);
    expect(board.cutStreams()).toBe(1);
    await until(async () => (await pageState()).reconnects >= 1);
    await until(async () => (await pageState()).received.length >= 25);

    await board.restartServer();
    await until(async () => (await pageState()).reconnects >= 2);
    const before = (await pageState()).received.length;
    await until(async () => (await pageState()).received.length >= before + 10);
    await stop();

    // Everything written reaches the view, and the page shows exactly the view.
    await until(async () => sorted(await viewRows()) === sorted(written()));
    await until(async () => sorted(await pageOrders()) === sorted(await viewRows())).catch(async (error: unknown) => {
      expect(await pageOrders()).toEqual(await viewRows());
      throw error;
    });
    const state = await pageState();
    expect(state.stale).toBe(0); // no change arrived that the page already had
    expect(new Set(state.received).size).toBe(state.received.length);
    expect(state.reconnects).toBe(2);
    expect(board.hub.stats().clients).toBe(1);
    console.log(`live-board: ${state.received.length} changes after ${state.snapshots} snapshot(s), ${state.reconnects} reconnections, last event id ${state.lastEventId}`);
    // The page never saw internal fields: the hub and the view hold the card projection only.
    expect(JSON.stringify(await pageOrders())).not.toContain('fraud');
    expect(await page.evaluate(() => document.querySelectorAll('.card').length)).toBe(Object.keys(await viewRows()).length);
  });

  it('a reload starts from a fresh snapshot and follows on from it', { timeout: 60_000 }, async () => {
    await page.reload();
    await until(() => page.evaluate(() => window.board?.ready === true));
    for (let i = 0; i < 25; i++) await board.writer.step();
    await until(async () => sorted(await viewRows()) === sorted(written()));
    await until(async () => sorted(await pageOrders()) === sorted(await viewRows()));
    const state = await pageState();
    expect({ snapshots: state.snapshots, stale: state.stale }).toEqual({ snapshots: 1, stale: 0 });
    expect(state.received.length).toBeGreaterThan(0);
    // The README's picture: written to the repository only when missing or asked for, so test runs leave no diff.
    await new Promise((resolve) => setTimeout(resolve, 600)); // let the arrival animations finish
    const target = !existsSync(SCREENSHOT) || process.env.RXFEED_UPDATE_SCREENSHOT === '1' ? SCREENSHOT : join(tmpdir(), 'live-board.png');
    await page.screenshot({ path: target as `${string}.png`, fullPage: true });
    console.log(`live-board screenshot: ${target}`);
  });
});
