// The live board: one EventSource, and rxfeed's LiveView keeping the open orders from the server's snapshot and
// every change after it. EventSource reconnects by itself and sends Last-Event-ID: the server replays what was
// missed, or sends a fresh snapshot when it cannot (its buffer moved on); the view swaps it in whole.
import { LiveView } from '/client.js';

const COLUMNS = ['new', 'paid', 'packed', 'shipped'];
const euros = new Intl.NumberFormat('en-IE', { style: 'currency', currency: 'EUR' });
const $ = (id) => document.getElementById(id);

const source = new EventSource('/events');
const live = new LiveView(source);

/** What the page knows, also read by the browser test. */
const board = {
  get orders() {
    return live.rows;
  },
  /** Changes applied after a snapshot, as `id@lsn` (the test checks them for duplicates). */
  received: [],
  snapshots: 0,
  reconnects: 0,
  opened: 0,
  ready: false,
  get stale() {
    return live.stats.stale;
  },
  get lastEventId() {
    return live.lastEventId;
  },
};
window.board = board;

function cardElement(id, card) {
  const li = document.createElement('li');
  li.className = 'card';
  li.dataset.id = id;
  const top = document.createElement('div');
  top.className = 'top';
  const code = document.createElement('span');
  code.className = 'id';
  code.textContent = id;
  const total = document.createElement('span');
  total.className = 'total';
  total.textContent = euros.format(card.totalCents / 100);
  top.append(code, total);
  const who = document.createElement('div');
  who.className = 'who';
  const city = document.createElement('span');
  city.textContent = ` · ${card.city}`;
  who.append(card.customer, city);
  const what = document.createElement('div');
  what.className = 'what';
  what.textContent = card.summary;
  li.append(top, who, what);
  return li;
}

function render(changedId) {
  for (const status of COLUMNS) {
    const column = document.querySelector(`.column[data-status="${status}"]`);
    const cards = [...live.rows].filter(([, c]) => c.status === status).sort(([a], [b]) => (a < b ? 1 : -1));
    const list = column.querySelector('ol');
    const existing = new Map([...list.children].map((li) => [li.dataset.id, li]));
    const next = cards.map(([id, card]) => {
      const old = existing.get(id);
      if (old && id !== changedId) return old;
      const li = cardElement(id, card);
      if (old) li.classList.add('flash');
      return li;
    });
    list.replaceChildren(...next);
    column.querySelector('h2 b').textContent = String(cards.length);
  }
  const open = [...live.rows.values()];
  $('open-count').textContent = String(open.length);
  $('open-value').textContent = euros.format(open.reduce((s, c) => s + c.totalCents, 0) / 100);
  $('event-count').textContent = String(board.received.length);
  $('snapshots').textContent = String(board.snapshots);
  $('stale').textContent = String(live.stats.stale);
  $('reconnects').textContent = String(board.reconnects);
  $('last-id').textContent = live.lastEventId || '–';
}

function setStatus(state) {
  const pill = $('status');
  pill.dataset.state = state;
  pill.querySelector('span').textContent = state;
}

source.onopen = () => {
  if (board.opened++ > 0) board.reconnects++;
  setStatus(live.ready ? 'live' : 'loading');
};
source.onerror = () => setStatus(source.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting');
source.addEventListener('snapshot-begin', (event) => {
  const { reason } = JSON.parse(event.data);
  if (reason) {
    $('banner').textContent = `Resynchronising (${reason}): loading the board again.`;
    $('banner').hidden = false;
  }
});
source.addEventListener('dropped', (event) => {
  const { reason } = JSON.parse(event.data);
  $('banner').textContent = `The server ended this stream (${reason}); reconnecting.`;
  $('banner').hidden = false;
});

live.subscribe((update) => {
  if (update.type === 'snapshot') {
    board.snapshots++;
    board.ready = true;
    $('banner').hidden = true;
    setStatus('live');
    render();
  } else if (update.type === 'change') {
    board.received.push(`${update.id}@${update.lsn}`);
    render(update.id);
  }
});
