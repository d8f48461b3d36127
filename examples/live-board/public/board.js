// The live board: load a snapshot, then follow the event stream from the snapshot's event id. EventSource
// reconnects by itself and sends Last-Event-ID, so the server replays exactly what was missed; a `reset` event
// (the gap is older than the server's replay buffer, or the server restarted) means: load the snapshot again.
const COLUMNS = ['new', 'paid', 'packed', 'shipped'];
const euros = new Intl.NumberFormat('en-IE', { style: 'currency', currency: 'EUR' });
const $ = (id) => document.getElementById(id);

/** What the page knows, also read by the browser test. */
const board = {
  orders: new Map(),
  /** Event ids received, in order (the test checks them for gaps and duplicates). */
  received: [],
  stream: '',
  lastSeq: 0,
  gaps: 0,
  duplicates: 0,
  resets: 0,
  reconnects: 0,
  opened: 0,
  ready: false,
};
window.board = board;

function parseId(id) {
  const dot = id.lastIndexOf('.');
  return { stream: id.slice(0, dot), seq: Number(id.slice(dot + 1)) };
}

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
    const cards = [...board.orders].filter(([, c]) => c.status === status).sort(([a], [b]) => (a < b ? 1 : -1));
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
  const open = [...board.orders.values()];
  $('open-count').textContent = String(open.length);
  $('open-value').textContent = euros.format(open.reduce((s, c) => s + c.totalCents, 0) / 100);
  $('event-count').textContent = String(board.received.length);
  $('gaps').textContent = String(board.gaps);
  $('duplicates').textContent = String(board.duplicates);
  $('resets').textContent = String(board.resets);
  $('reconnects').textContent = String(board.reconnects);
  $('last-id').textContent = board.stream ? `${board.stream}.${board.lastSeq}` : '–';
}

function setStatus(state) {
  const pill = $('status');
  pill.dataset.state = state;
  pill.querySelector('span').textContent = state;
}

function apply(change) {
  const card = change.data;
  if (!card || card.status === 'delivered' || card.status === 'cancelled') board.orders.delete(change.id);
  else board.orders.set(change.id, card);
}

let source;

async function start() {
  source?.close();
  setStatus('connecting');
  const snapshot = await (await fetch('/snapshot')).json();
  board.orders = new Map(Object.entries(snapshot.orders));
  ({ stream: board.stream, seq: board.lastSeq } = parseId(snapshot.lastEventId));
  render();
  source = new EventSource(`/events?lastEventId=${encodeURIComponent(snapshot.lastEventId)}`);
  source.onopen = () => {
    if (board.opened++ > 0) board.reconnects++;
    setStatus('live');
    $('banner').hidden = true;
    board.ready = true;
    render();
  };
  source.onerror = () => setStatus(source.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting');
  source.onmessage = (event) => {
    const { stream, seq } = parseId(event.lastEventId);
    if (stream === board.stream && seq <= board.lastSeq) board.duplicates++;
    else if (stream !== board.stream || seq !== board.lastSeq + 1) board.gaps++;
    board.received.push(event.lastEventId);
    board.stream = stream;
    board.lastSeq = seq;
    const change = JSON.parse(event.data);
    apply(change);
    render(change.id);
  };
  source.addEventListener('reset', (event) => {
    board.resets++;
    const { reason } = JSON.parse(event.data);
    $('banner').textContent = `Resynchronising (${reason}): reloading the board from a snapshot.`;
    $('banner').hidden = false;
    void start();
  });
  source.addEventListener('dropped', (event) => {
    const { reason } = JSON.parse(event.data);
    $('banner').textContent = `The server dropped this stream (${reason}); reconnecting where it left off.`;
    $('banner').hidden = false;
  });
}

void start();
