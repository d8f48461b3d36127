import { CosmosHttpError } from '../errors.js';
import type { Doc } from './types.js';

interface PatchOperation {
  op: string;
  path: string;
  value?: unknown;
  from?: string;
}

/**
 * Applies JSON-patch operations as Cosmos DB defines them (`add`, `set`, `replace`, `remove`, `incr`, `move`)
 * to `doc` in place and returns it; a bad operation is a 400 that names it.
 */
export function applyPatch(doc: Doc, operations: unknown): Doc {
  if (!Array.isArray(operations) || operations.length === 0) throw new CosmosHttpError(400, 'a patch needs a non-empty operations array');
  for (const raw of operations as PatchOperation[]) {
    if (typeof raw?.path !== 'string' || !raw.path.startsWith('/')) throw new CosmosHttpError(400, 'each patch operation needs a path starting with "/"');
    const op = raw.op.toLowerCase();
    if (op === 'move') {
      if (typeof raw.from !== 'string') throw new CosmosHttpError(400, 'a move needs "from"');
      const { parent, name } = locate(doc, raw.from);
      if (!(name in parent)) throw new CosmosHttpError(400, `move source ${raw.from} does not exist`);
      const value = (parent as Record<string, unknown>)[name];
      delete (parent as Record<string, unknown>)[name];
      setAt(doc, raw.path, value, 'set');
      continue;
    }
    if (op === 'remove') {
      const { parent, name } = locate(doc, raw.path);
      if (Array.isArray(parent)) parent.splice(Number(name), 1);
      else if (name in parent) delete (parent as Record<string, unknown>)[name];
      else throw new CosmosHttpError(400, `cannot remove ${raw.path}: it does not exist`);
      continue;
    }
    if (op === 'incr') {
      const { parent, name } = locate(doc, raw.path);
      const cur = (parent as Record<string, unknown>)[name] ?? 0;
      if (typeof cur !== 'number' || typeof raw.value !== 'number') throw new CosmosHttpError(400, `incr needs numbers at ${raw.path}`);
      (parent as Record<string, unknown>)[name] = cur + raw.value;
      continue;
    }
    if (op !== 'add' && op !== 'set' && op !== 'replace') throw new CosmosHttpError(400, `unknown patch operation ${raw.op}`);
    setAt(doc, raw.path, raw.value, op);
  }
  return doc;
}

function locate(doc: Doc, path: string): { parent: Record<string, unknown> | unknown[]; name: string } {
  const segs = path.split('/').slice(1).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  let cur: unknown = doc;
  for (const s of segs.slice(0, -1)) {
    cur = (cur as Record<string, unknown>)?.[s];
    if (cur === null || typeof cur !== 'object') throw new CosmosHttpError(400, `patch path ${path} does not exist`);
  }
  return { parent: cur as Record<string, unknown>, name: segs[segs.length - 1]! };
}

function setAt(doc: Doc, path: string, value: unknown, op: 'add' | 'set' | 'replace'): void {
  const { parent, name } = locate(doc, path);
  if (Array.isArray(parent)) {
    const i = name === '-' ? parent.length : Number(name);
    if (op === 'add') parent.splice(i, 0, value);
    else parent[i] = value;
    return;
  }
  if (op === 'replace' && !(name in parent)) throw new CosmosHttpError(400, `cannot replace ${path}: it does not exist`);
  parent[name] = value;
}
