import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'puppeteer-core';
import puppeteer from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toCard, type OrderCard } from '../../examples/live-board/orders.js';
import { startLiveBoard, type LiveBoard } from '../../examples/live-board/server.js';
import { parseEventId } from '../../src/sse/index.js';

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
  gaps: number;
  duplicates: number;
  resets: number;
  reconnects: number;
  ready: boolean;
  lastSeq: number;
}
declare const window: { board: PageBoard };
declare const document: { querySelectorAll(selector: string): { length: number } };

describe.skipIf(!chromium)('examples/live-board in headless Chromium', () => {
  let board: LiveBoard;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    board = await startLiveBoard({ port: 0, rate: 0, ranges: 2, heartbeatMs: 1_000 });
    browser = await puppeteer.launch({
      executablePath: chromium,
      headless: true,
      // CI runs as root in a container: no sandbox, no /dev/shm worth the name.
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
    page = await browser.newPage();
    await page.setViewport({ width: 1360, height: 820 });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await board?.close();
  });

  /** Polls `check` every 50 ms until it holds (puppeteer's waitForFunction never resolved under vitest here; evaluate does). */
  async function until(check: () => Promise<boolean>, limitMs = 20_000): Promise<void> {
    for (const start = Date.now(); !(await check()); ) {
      if (Date.now() - start > limitMs) throw new Error(`the page did not get there within ${limitMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** The board the page shows, as plain JSON. */
  const pageOrders = () => page.evaluate(() => Object.fromEntries(window.board.orders) as Record<string, OrderCard>);
  /** The board the writer's own records say it should show. */
  const expected = () => Object.fromEntries([...board.writer.openOrders()].map(([id, order]) => [id, toCard(order)]));
  const pageState = () =>
    page.evaluate(() => ({ ...window.board, orders: undefined }) as Omit<PageBoard, 'orders'>);
  /** Waits until the page shows exactly what was written, and has every event the hub numbered. */
  async function caughtUp(): Promise<void> {
    const sorted = (orders: Record<string, OrderCard>) => JSON.stringify(Object.entries(orders).sort(([a], [b]) => (a < b ? -1 : 1)));
    const same = async () => sorted(await pageOrders()) === sorted(expected()) && (await pageState()).lastSeq === board.hub.stats().head;
    await until(same).catch(async (error: unknown) => {
      expect(await pageOrders()).toEqual(expected());
      throw error;
    });
  }

  it('shows orders as they are written, and resumes after a cut connection with no gap and no duplicate', { timeout: 60_000 }, async () => {
    await page.goto(board.url);
    await until(() => page.evaluate(() => window.board?.ready === true));

    for (let i = 0; i < 12; i++) await board.writer.create();
    await until(() => page.evaluate(() => document.querySelectorAll('.column[data-status="new"] .card').length === 12));
    expect(await page.$eval('.card[data-id="A-0001"] .who', (e) => e.textContent)).toMatch(/\w+ · \w+/);
    await caughtUp();

    // Keep writing while the connection is cut mid-stream, twice; EventSource reconnects with Last-Event-ID.
    for (let i = 0; i < 60; i++) {
      await board.writer.step();
      if (i === 15) expect(board.cutStreams()).toBe(1);
      if (i === 40) {
        // Cut again once the browser is back (what was written meanwhile must arrive from the replay buffer).
        await until(() => page.evaluate(() => window.board.reconnects === 1));
        expect(board.cutStreams()).toBe(1);
      }
      if (i % 5 === 0) await new Promise((resolve) => setTimeout(resolve, 40));
    }
    await caughtUp();
    const state = await pageState();
    expect(state.reconnects).toBe(2);
    expect({ gaps: state.gaps, duplicates: state.duplicates, resets: state.resets }).toEqual({ gaps: 0, duplicates: 0, resets: 0 });
    const seqs = state.received.map((id) => parseEventId(id)!.seq);
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => seqs[0]! + i));
    expect(seqs.at(-1)).toBe(board.hub.stats().head);
    expect(board.hub.stats().resumed).toBeGreaterThanOrEqual(3); // the first connection (from the snapshot) and two reconnections
    // The page never saw internal fields: the hub sends the card projection only.
    expect(JSON.stringify(await pageOrders())).not.toContain('fraud');
  });

  it('a reload starts from a fresh snapshot and follows on from it', { timeout: 60_000 }, async () => {
    await page.reload();
    await until(() => page.evaluate(() => window.board?.ready === true));
    await caughtUp();
    for (let i = 0; i < 25; i++) await board.writer.step();
    await caughtUp();
    const state = await pageState();
    expect({ gaps: state.gaps, duplicates: state.duplicates, resets: state.resets }).toEqual({ gaps: 0, duplicates: 0, resets: 0 });
    expect(state.received.length).toBeGreaterThan(0);
    // The README's picture: written to the repository only when missing or asked for, so test runs leave no diff.
    await new Promise((resolve) => setTimeout(resolve, 600)); // let the arrival animations finish
    const target = !existsSync(SCREENSHOT) || process.env.RXFEED_UPDATE_SCREENSHOT === '1' ? SCREENSHOT : join(tmpdir(), 'live-board.png');
    await page.screenshot({ path: target as `${string}.png`, fullPage: true });
    console.log(`live-board screenshot: ${target}`);
  });
});
