/*
 * The rxfeed lease protocol as a Promela model (docs/lease-protocol.md is its prose; change them together).
 *
 * Checked by test/model/spin.test.ts (commands and scopes in docs/lease-protocol.md, "The model"):
 *   safety:   spin -a [-DONE_LEASE] [-DH=3] leases.pml && gcc -O2 -DSAFETY -o pan pan.c && ./pan -m400000
 *   liveness: spin -a -DLIVE leases.pml && gcc -O2 -o pan pan.c && ./pan -a -f -m400000
 * Each -DBUG_* puts back one protocol bug fixed earlier; spin must then find a counterexample:
 *   BUG_SKEWED_EXPIRY       expiry judged from the writer's timestamp against the reader's wall clock
 *   BUG_REQUESTER_CLOCK     the owner's handoff deadline computed from the requester's timestamp
 *   BUG_CHILD_EPOCH         a split child created at epoch 0 instead of above its parent's epoch
 *   BUG_STOP_LEAVES_HANDED  stop() not releasing a lease handed to it and not taken yet
 *   BUG_PARENT_OUTLIVES     the split without the replaced mark: children created at the parent's epoch while
 *                           the parent is still an ordinary lease, then the parent deleted (a delete that may
 *                           never come: the owner's ownership ends first)
 *   BUG_FINISH_BY_MARKER    (liveness) only the host that marked a parent replaced finishes the replacement:
 *                           when it crashes in between, the parent stays replaced and no child is ever read
 * and, with -DDEEP (the child splits in turn, creates may land late):
 *   BUG_NO_TOMBSTONE        a delete removes the document: a finisher's create of the child, sent before the
 *                           child was created, taken, replaced and deleted, lands late below its old epoch
 *   BUG_CHILDREN_FROM_LISTING  a finisher creates the children of its own listing, not those recorded with the
 *                           mark: after the child's partition split, the grandchild beside the child
 *
 * Scope: H hosts, two lineages: lease 0 (split once into child lease 2, which replaces it) and lease 1.
 * -DDEEP: the child's partition may split in turn (an event of the store, at any time): the child, read to its
 * end, is replaced by lease 3 the same way (and deleted, leaving a tombstone at its epoch); the parent's
 * finishers send the child's create and may pause: it lands later, at any time (even after they crashed).
 * Time is discrete and relative: every age and deadline below is a count of ticks, saturating, so the state
 * space is finite; epochs are bounded by MAXEP (no acquisition past it: an under-approximation, which the
 * liveness check shows does not bite there: a lease it kept from being taken would never be read).
 *
 * Code map (src/leases/):
 *   acquire   - coordinator/Acquirer.ts acquire / own (epoch + 1, signals dropped, local deadline starts)
 *   ask       - protocol/handover.ts askForLease (handoff request: rxfeed.handoffTo / rxfeed.handoffAt)
 *   renew     - coordinator/Renewer.ts -> LeaseWriter.write (conditional on the etag; a conflict re-reads, a new request is watched)
 *   emit      - the reader emitting a batch into a sink/view that fences by epoch along the lineage
 *   ckpt      - OwnedLease.checkpoint -> LeaseWriter.checkpoint
 *   mark      - GonePartitions.replace -> coordinator/replaceGoneLease.ts: the parent marked replaced at its epoch
 *   finish    - replaceGoneLease run by whoever finds a replaced parent: missing children, then the parent deleted
 *   handback  - Endings.handOver -> protocol/handover.ts handBack (drain, then owner := requester, rxfeed.untakenAtEpoch)
 *   (Clock)   - Ownership.confirm / handoffRequested timers -> Endings.lose
 *   stop      - Coordinator.stop: Endings.handOver every ownership, Departure.leave (settle asked leases, release notices)
 *   crash     - the process dies: nothing written
 */

#ifndef H
#define H 2            /* hosts 1..H */
#endif
#ifdef DEEP
#ifdef LIVE
#error "-DDEEP is a safety scope"
#endif
#define NL 4           /* lease slots: 0 = parent of lineage 0, 1 = lineage 1, 2 = the child replacing 0,
                        * 3 = the grandchild replacing 2 */
#else
#define NL 3           /* lease slots: 0 = parent of lineage 0, 1 = lineage 1, 2 = the child replacing 0 */
#endif
#define LIN(l) ((l) == 1 -> 1 : 0)

/* Timings in ticks (defaults in protocol/timings.ts: expiration 60 s, renew 40 s, deadline margin
 * min(exp/10, (exp-renew)/2) = 6 s). The model keeps their order, not their ratios, to stay small:
 * 1 tick = 15 s, expiration 4, renewal due 1 tick after a write, margin 2 ticks (> DRIFT), drift 1 tick. */
#define EXP 4          /* leaseExpirationMs */
#define MARGIN 2       /* deadlineMarginMs: the owner stops this long before others may take the lease */
#define USABLE (EXP - MARGIN)
#define RENEW 1        /* leaseRenewIntervalMs: a renewal is due this long after the last confirmed write */
#define DRIFT 1        /* clocks run at about the same rate: an observer's count may run ahead by DRIFT */
#define TAKE (EXP - DRIFT) /* the earliest an observer may judge a version it first saw as expired */
#define SKEW 2         /* wall clocks may differ by any offset; the bugs' model uses 0 or SKEW */
#define MAXPOS 2       /* positions of lineage 0: 1 in the parent, 2 in the child; lineage 1: 1..2 */
#define PARENT_END 1
#define END(l) ((l) == 0 -> PARENT_END : ((l) == 3 -> MAXPOS + 1 : MAXPOS))   /* the grandchild: one more */
#ifndef MAXEP
#ifdef LIVE
#define MAXEP 5
#else
#define MAXEP 3
#endif
#endif
#define EPCAP(l) ((l) == 2 -> MAXEP + 2 : ((l) == 3 -> MAXEP + 4 : MAXEP))   /* a child starts above its parent's epoch */
#define NONE 255
#define SAT(x, m) if :: x != NONE && x < m -> x++ :: else -> skip fi

/* ---- the lease store (one document per slot; every write is conditional on the version read) ---- */
bit  ex[NL];           /* the document exists */
byte own[NL];          /* Owner: 0 = free, else host id */
byte ep[NL];           /* epoch (fencing token), +1 on each change of owner */
byte ck[NL];           /* ContinuationToken: the checkpoint */
byte req[NL];          /* rxfeed.handoffTo: host asking for the lease, 0 = none */
bit  ans[NL];          /* the owner wrote the lease since the request landed (the requester's clock starts) */
bit  untaken[NL];      /* rxfeed.untakenAtEpoch == epoch: handed over / a child, no process reads it yet */
bit  notice[NL];       /* rxfeed.releasedBy: a stopping host's release notice */
bit  repl;             /* rxfeed.replacedAtEpoch on the parent (lease 0): gone, being replaced by its children */
#ifdef DEEP
bit  repl2;            /* rxfeed.replacedAtEpoch on the child (lease 2), replaced by lease 3 */
bit  psplit;           /* the store: the child's partition has split (listings show lease 3's partition) */
bit  born[NL];         /* the lease was created (noted in its parent: rxfeed.replacedBy): never created again */
byte tep[NL];          /* the tombstone's epoch (0: none) */
byte fl[H + 1];        /* a host's create in flight: the lease it creates (0 = none) */
byte fep[H + 1];       /* its epoch */
byte fck[H + 1];       /* its checkpoint */
#define REPL(l) ((l) == 0 && repl || (l) == 2 && repl2)
#else
#define REPL(l) ((l) == 0 && repl)
#endif
/* Observations (coordinator/Observations.ts), worst case: every host sees each version the moment it is
 * written, so one age per lease stands for every host's "first seen" (seeing it later only delays takeovers). */
byte age[NL];          /* ticks since the current version was written (its etag first seen) */
byte aage[NL];         /* ticks since the owner first wrote a version carrying the request, NONE = not yet */
#if defined(BUG_SKEWED_EXPIRY) || defined(BUG_REQUESTER_CLOCK)
#define WALL_CLOCKS
byte sage[NL];         /* ticks since the last write (only the skewed-clock bugs read it) */
byte wby[NL];          /* who wrote the timestamp last */
byte off[H + 1];       /* wall-clock offset of each host */
#endif

/* ---- the view (a sink fencing by key range along the lineage) ---- */
byte vep[2];           /* highest epoch written per lineage */
byte vsl[2];           /* the lease (key range) that wrote at vep: another range at the same epoch is refused */
bit  cw;               /* a descendant of lease 0 (2, or 3) has had a write accepted (for the assertion only) */
#ifdef DEEP
bit  cw3;              /* the grandchild (lease 3) has had a write accepted (for the assertion only) */
#endif
byte lck[2];           /* highest checkpoint ever stored per lineage (for the assertion only) */

/* ---- hosts ---- */
bit  alive[H + 1];
byte down;             /* hosts crashed or stopped: at most H - 1, one host stays alive */
#define I(h, l) ((h) * NL + (l))
bit  held[(H + 1) * NL];   /* an Ownership is live: the host reads (and may emit for) the lease */
byte hep[(H + 1) * NL];    /* its epoch */
byte rem[(H + 1) * NL];    /* ticks to its local deadline (Ownership.confirm: sentAt + expiration - margin) */
byte hdl[(H + 1) * NL];    /* ticks to its handoff deadline (Ownership.handoffRequested), NONE if no request */
byte pos[(H + 1) * NL];    /* reader position */

/* Liveness (-DLIVE): faults are bounded; a fault is an ask (a steal), a crash, a stop, or a tick while a live
 * host still has a step due (a slow host: its renewal may come after its local deadline). After the last fault
 * hosts do what is due before time moves on (the clock waits for them), so every run is fair by construction. */
#if defined(LIVE) && !defined(NF)
#define NF 2
#endif
#ifdef NF
byte nf;               /* faults so far */
#define FAULT (nf < NF)
#define FAULTED nf++
#else
#define FAULT true
#define FAULTED skip
#endif

/* Any write of lease l is a new version (a new etag): every host's observation of it starts over. */
inline written(l, by) {
  age[l] = 0;
  if :: !ans[l] -> aage[l] = NONE :: else -> skip fi;
#ifdef WALL_CLOCKS
  sage[l] = 0; wby[l] = by;
#endif
  skip
}

/* Expiry as the code judges it: one expiration after this host FIRST SAW the current version (Observations),
 * never the writer's timestamp against this host's clock. DRIFT lets the observer's count run ahead. */
#ifdef BUG_SKEWED_EXPIRY
#define EXPIRED(h, l) (own[l] == 0 || sage[l] + off[h] >= TAKE + off[wby[l]])
#else
#define EXPIRED(h, l) (own[l] == 0 || age[l] >= TAKE)
#endif

/* Handoff deadline of the owner h for a request by r, from when h first saw it. */
#ifdef BUG_REQUESTER_CLOCK
#define HANDOFF_DUE(h, r) (USABLE + off[r] - off[h])
#else
#define HANDOFF_DUE(h, r) (USABLE)
#endif

/* A write under an owned lease (renewal or checkpoint): conditional on owner and epoch (the etag re-read). */
#define OURS(h, l) (ex[l] && own[l] == h && ep[l] == hep[I(h, l)])

/* The enabling conditions of each host step (also what "a step is due" means for the clock under -DLIVE). */
/* acquire: a free, expired or handed-over lease (planBalance take), or one asked for whose request went
 * unanswered for an expiration since its owner's first answer (force); never a replaced lease */
#define CAN_TAKE(h, l) (ex[l] && !held[I(h, l)] && ep[l] < EPCAP(l) && !REPL(l) && \
  (EXPIRED(h, l) || own[l] == h && untaken[l] || req[l] == h && aage[l] != NONE && aage[l] >= TAKE))
/* renew / checkpoint: a renewal is due, or a batch was read past the stored checkpoint */
#define CAN_RENEW(h, l) (held[I(h, l)] && (rem[I(h, l)] <= USABLE - RENEW || pos[I(h, l)] > ck[l]))
#define CAN_EMIT(h, l) (held[I(h, l)] && pos[I(h, l)] < END(l))
#define CAN_HANDBACK(h, l) (held[I(h, l)] && OURS(h, l) && req[l] != 0 && req[l] != h)
/* the parent's reader reached the end of its gone partition (its checkpoint may lag behind) */
#define GONE(h) (held[I(h, 0)] && OURS(h, 0) && pos[I(h, 0)] == PARENT_END)
#ifdef BUG_PARENT_OUTLIVES
#define CAN_SPLIT(h) (GONE(h) && !ex[2])
#define CAN_DELETE(h) (GONE(h) && ex[2])
#define CAN_FINISH(h) false
#else
#define CAN_SPLIT(h) (GONE(h) && !repl)
#define CAN_DELETE(h) false
#ifdef BUG_FINISH_BY_MARKER
byte rby;              /* the host that marked the parent */
#define CAN_FINISH(h) (ex[0] && repl && rby == h)
#else
#define CAN_FINISH(h) (ex[0] && repl)
#endif
#endif
#ifdef DEEP
/* the child's reader reached the end of its partition, and the partition has split */
#define GONE2(h) (held[I(h, 2)] && OURS(h, 2) && pos[I(h, 2)] == MAXPOS && psplit)
#define CAN_SPLIT2(h) (GONE2(h) && !repl2)
#define CAN_FINISH2(h) (ex[2] && repl2)
/* the children of the parent a finisher creates: those recorded with the mark (the child), or, before the
 * fix, those of its own listing (the child's children once the child's partition split) */
#ifdef BUG_CHILDREN_FROM_LISTING
#define KID (psplit -> 3 : 2)
#else
#define KID 2
#endif
#endif
#define DUE(h, l) (CAN_TAKE(h, l) || CAN_RENEW(h, l) || CAN_EMIT(h, l) || CAN_HANDBACK(h, l))
#ifdef DEEP
#define BUSY(h) (alive[h] && (DUE(h, 0) || DUE(h, 1) || DUE(h, 2) || DUE(h, 3) || CAN_SPLIT(h) || CAN_FINISH(h) || CAN_SPLIT2(h) || CAN_FINISH2(h)))
#else
#define BUSY(h) (alive[h] && (DUE(h, 0) || DUE(h, 1) || DUE(h, 2) || CAN_SPLIT(h) || CAN_DELETE(h) || CAN_FINISH(h)))
#endif
#if H == 2
#define ANY_BUSY (BUSY(1) || BUSY(2))
#else
#define ANY_BUSY (BUSY(1) || BUSY(2) || BUSY(3))
#endif

/* The properties, each an assertion; -DCHECKS=<mask> keeps some of them only (a mutant's trail then shows the
 * property named): 1 one owner per lineage, 2 checkpoints never move back, 4 the view refuses only stale
 * ownerships, 8 a parent's write never accepted after its child's, 16 stop() leaves nothing handed to it. */
#ifndef CHECKS
#define CHECKS 31
#endif
#define CHECK(bit, e) assert(!(CHECKS & bit) || (e))

/* Never two live ownerships in one lineage (checked whenever one starts or emits). */
#ifdef DEEP
#define HELD0(k) (held[I(k, 0)] || held[I(k, 2)] || held[I(k, 3)])
#else
#define HELD0(k) (held[I(k, 0)] || held[I(k, 2)])
#endif
inline mutex(h, l) {
  for (k : 1 .. H) {
    if
    :: k != h -> CHECK(1, !HELD0(k) || LIN(l) == 1);
                 CHECK(1, !held[I(k, 1)] || LIN(l) == 0)
    :: else -> skip
    fi
  }
}

/* Ends an ownership. What it kept is cleared (never read again): states differing only there are one state. */
inline lose(h, l) { held[I(h, l)] = 0; hep[I(h, l)] = 0; rem[I(h, l)] = 0; hdl[I(h, l)] = NONE; pos[I(h, l)] = 0 }

/* Starts an ownership: Acquirer.own. The local deadline counts from the write's send. */
inline start(h, l, deadline) {
  held[I(h, l)] = 1; hep[I(h, l)] = ep[l]; rem[I(h, l)] = deadline; hdl[I(h, l)] = NONE; pos[I(h, l)] = ck[l];
  mutex(h, l)
}

/* The child replacing the parent: created once (deterministic id), free, untaken, from the parent's stored
 * checkpoint, at an epoch above every write of the parent (taking it writes one more). */
#ifdef DEEP
/* A lease created (free, untaken) at epoch e from checkpoint c. */
inline createAt(l, e, c, by) {
  ex[l] = 1; own[l] = 0; ep[l] = e; ck[l] = c; untaken[l] = 1; req[l] = 0; ans[l] = 0; notice[l] = 0;
  born[l] = 1; if :: l == 2 -> repl2 = 0 :: else -> skip fi;
  written(l, by)
}
#endif

inline createChild(by) {
  ex[2] = 1; own[2] = 0; ck[2] = ck[0]; untaken[2] = 1; req[2] = 0; ans[2] = 0; notice[2] = 0;
#if defined(BUG_CHILD_EPOCH)
  ep[2] = 0;
#elif defined(BUG_PARENT_OUTLIVES)
  ep[2] = ep[0];
#else
  ep[2] = ep[0] + 1;
#endif
  written(2, by)
}

/* The parent deleted: its document is gone (its fields cleared, one state whatever they held). */
inline deleteParent(by) {
  ex[0] = 0; own[0] = 0; ep[0] = 0; ck[0] = 0; req[0] = 0; ans[0] = 0; untaken[0] = 0; notice[0] = 0; age[0] = 0; aage[0] = NONE;
#ifdef WALL_CLOCKS
  sage[0] = 0; wby[0] = 0;
#endif
  skip
}

#ifdef DEEP
/* The child deleted (replaced by lease 3): a tombstone keeps its epoch (the rxfeed scheme) */
inline deleteChild(by) {
#ifndef BUG_NO_TOMBSTONE
  tep[2] = ep[2];
#endif
  ex[2] = 0; own[2] = 0; ep[2] = 0; ck[2] = 0; req[2] = 0; ans[2] = 0; untaken[2] = 0; notice[2] = 0; age[2] = 0; aage[2] = NONE;
  skip
}

/* A create in flight lands: create if absent, over a tombstone only at its epoch or above. */
inline land(k) {
  if
  :: !ex[fl[k]] && fep[k] >= tep[fl[k]] -> createAt(fl[k], fep[k], fck[k], k)
  :: else -> skip          /* there, or below its tombstone: refused */
  fi;
  fl[k] = 0; fep[k] = 0; fck[k] = 0
}
#endif

/* The host steps, each on one lease l (each an atomic step of the host, enabled by its CAN_ condition). */
inline take(h, l) {
  own[l] = h; ep[l]++; req[l] = 0; ans[l] = 0; untaken[l] = 0; notice[l] = 0; written(l, h);
  aage[l] = NONE;
  start(h, l, USABLE)
}

/* ask the live owner of a lease for it (a steal): askForLease; never for a replaced lease */
#define CAN_ASK(h, l) (FAULT && !held[I(h, 0)] && !held[I(h, 1)] && !held[I(h, 2)] && \
  ex[l] && own[l] != 0 && own[l] != h && req[l] == 0 && !untaken[l] && !REPL(l) && !EXPIRED(h, l))
inline ask(h, l) { req[l] = h; ans[l] = 0; aage[l] = NONE; written(l, h); FAULTED }

/* renew / checkpoint: a conditional write; the owner drops a release notice it meets, answers a request.
 * A replaced lease is never renewed: its mark ended the one ownership that could write it. */
inline renew(h, l) {
  if
  :: OURS(h, l) && !REPL(l) ->
       if :: req[l] != 0 && hdl[I(h, l)] == NONE -> hdl[I(h, l)] = HANDOFF_DUE(h, req[l]) :: else -> skip fi;
       CHECK(2, pos[I(h, l)] >= lck[LIN(l)]);   /* checkpoints never move backwards along a lineage */
       ck[l] = pos[I(h, l)]; lck[LIN(l)] = ck[l];
       if :: req[l] != 0 && !ans[l] -> ans[l] = 1; aage[l] = 0 :: else -> skip fi;
       notice[l] = 0; written(l, h);
       rem[I(h, l)] = USABLE
  :: else -> lose(h, l)                    /* another host's epoch: LeaseLost */
  fi
}

/* emit a batch into the view, fenced by epoch along the lineage: refused below the highest epoch written,
 * and at that epoch from another key range (a parent taken again at its child's epoch) */
inline emit(h, l) {
  if
  :: hep[I(h, l)] < vep[LIN(l)] || hep[I(h, l)] == vep[LIN(l)] && vsl[LIN(l)] != l ->
       /* refused (ViewFencedError): never the store's current owner at its current epoch */
       CHECK(4, !(OURS(h, l) && !untaken[l]));
       lose(h, l)
  :: else ->
       mutex(h, l);
       /* along a lineage, a write under the replaced parent is never accepted after its child's */
#ifdef DEEP
       CHECK(8, l != 0 || !cw); CHECK(8, l != 2 || !cw3);
       if :: l == 2 -> cw = 1 :: l == 3 -> cw = 1; cw3 = 1 :: else -> skip fi;
#else
       CHECK(8, l != 0 || !cw);
       if :: l == 2 -> cw = 1 :: else -> skip fi;
#endif
       vep[LIN(l)] = hep[I(h, l)]; vsl[LIN(l)] = l; pos[I(h, l)]++
  fi
}

/* hand a lease back to the host that asked for it (after draining): handBack */
inline handback(h, l) { own[l] = req[l]; req[l] = 0; ans[l] = 0; untaken[l] = 1; written(l, h); lose(h, l) }

#define STEPS(L) \
  :: atomic { alive[h] && CAN_TAKE(h, L) -> take(h, L) } \
  :: atomic { alive[h] && CAN_ASK(h, L) -> ask(h, L) } \
  :: atomic { alive[h] && CAN_RENEW(h, L) -> renew(h, L) } \
  :: atomic { alive[h] && CAN_EMIT(h, L) -> emit(h, L) } \
  :: atomic { alive[h] && CAN_HANDBACK(h, L) -> handback(h, L) }

proctype Host(byte h) {
  byte l, k;
  do
  STEPS(0)
#ifndef ONE_LEASE
  STEPS(1)
#endif
  STEPS(2)
#ifdef DEEP
  STEPS(3)
  /* the child split in turn: marked replaced by its owner, finished by anyone (lease 3 from the child's
   * stored checkpoint above its epoch, then the child deleted) */
  :: atomic { alive[h] && CAN_SPLIT2(h) ->
       repl2 = 1; req[2] = 0; ans[2] = 0; notice[2] = 0; written(2, h); lose(h, 2) }
  :: atomic { alive[h] && CAN_FINISH2(h) ->
       if
       :: !ex[3] && !born[3] -> createAt(3, ep[2] + 1, ck[2], h)
       :: else -> deleteChild(h)
       fi }
#endif
#ifdef BUG_PARENT_OUTLIVES
  /* the split before the fix: the child created at the parent's epoch while the parent stays an ordinary
   * lease of this ownership; the parent deleted by a later step, which never comes if the ownership ends first
   * (local deadline, crash): the parent expires and is taken again, from its stored checkpoint */
  :: atomic { alive[h] && CAN_SPLIT(h) -> createChild(h) }
  :: atomic { alive[h] && CAN_DELETE(h) -> deleteParent(h); lose(h, 0) }
#else
  /* split: the parent's reader reached the end of its gone partition; its owner marks the parent replaced,
   * a write conditional on its epoch, before any child exists. The ownership ends there: a replaced lease is
   * never acquired, stolen or renewed. */
  :: atomic { alive[h] && CAN_SPLIT(h) ->
       repl = 1; req[0] = 0; ans[0] = 0; notice[0] = 0; written(0, h); lose(h, 0);
#ifdef BUG_FINISH_BY_MARKER
       rby = h;
#endif
       skip }
  /* whoever finds a replaced parent (its owner next, or any host's scan) finishes the replacement,
   * idempotently: the missing child first, then the parent deleted */
#ifdef DEEP
  /* the create of a child never created is sent, and lands later (Clock); the host waits for its answer */
  :: atomic { alive[h] && CAN_FINISH(h) && fl[h] == 0 ->
       if
       :: !born[KID] -> fl[h] = KID; fep[h] = ep[0] + 1; fck[h] = ck[0]
       :: else -> deleteParent(h)
       fi }
#else
  :: atomic { alive[h] && CAN_FINISH(h) ->
       if
       :: !ex[2] -> createChild(h)
       :: else -> deleteParent(h)
       fi }
#endif
#endif
  /* hand a lease back to the host that asked for it (after draining): handBack */
  /* graceful stop(): release every ownership, settle the leases asked for, leave release notices */
  :: atomic { alive[h] && down < H - 1 && FAULT ->
       FAULTED;
       for (l : 0 .. NL - 1) {
         if :: held[I(h, l)] && OURS(h, l) -> own[l] = 0; req[l] = 0; ans[l] = 0; untaken[l] = 0; written(l, h) :: else -> skip fi;
         lose(h, l);
#ifndef BUG_STOP_LEAVES_HANDED
         if :: ex[l] && own[l] == h && untaken[l] -> own[l] = 0; untaken[l] = 0; written(l, h) :: else -> skip fi;
#endif
         if :: ex[l] && req[l] == h -> req[l] = 0; ans[l] = 0; written(l, h) :: else -> skip fi
       };
       for (l : 0 .. NL - 1) {
         if :: ex[l] && own[l] != 0 && own[l] != h && !REPL(l) -> notice[l] = 1; written(l, h) :: else -> skip fi
       };
       /* stop() leaves nothing owned that it held or was handed (a lease it lost at its local deadline still
        * names it until it expires: another process under the same name may be reading it) */
       for (l : 0 .. NL - 1) { CHECK(16, !(ex[l] && own[l] == h && untaken[l])) };
       alive[h] = 0; down++; l = 0; break }
  /* crash: nothing is written */
  :: atomic { alive[h] && down < H - 1 && FAULT ->
       FAULTED;
       for (l : 0 .. NL - 1) { lose(h, l) };
       alive[h] = 0; down++; l = 0; break }
  od
}

/* Time: one tick. The owners' timers are exact on their own clocks: a local deadline or a handoff deadline
 * that falls on this tick ends the ownership within the tick (Ownership.confirm / handoffRequested -> lose);
 * the drift between hosts is on the observers' side (see EXPIRED). Under -DLIVE a tick while a host has a
 * step due is a fault (that host is slow). */
proctype Clock() {
  byte h, l;
  do
  :: atomic {
#ifdef NF
       (!ANY_BUSY || FAULT) -> if :: ANY_BUSY -> FAULTED :: else -> skip fi;
#endif
       for (l : 0 .. NL - 1) { if :: ex[l] -> SAT(age[l], TAKE); SAT(aage[l], TAKE) :: else -> skip fi };
       for (h : 1 .. H) {
         for (l : 0 .. NL - 1) {
           if
           :: held[I(h, l)] ->
                rem[I(h, l)]--;
                if :: hdl[I(h, l)] != NONE -> hdl[I(h, l)]-- :: else -> skip fi;
                if :: rem[I(h, l)] == 0 || hdl[I(h, l)] == 0 -> lose(h, l) :: else -> skip fi
           :: else -> skip
           fi
         }
       };
#ifdef WALL_CLOCKS
       for (l : 0 .. NL - 1) { SAT(sage[l], TAKE + SKEW) };
#endif
       h = 0; l = 0
     }
#ifdef DEEP
  /* the store: the child's partition splits; a create in flight lands */
  :: atomic { !psplit -> psplit = 1 }
  :: atomic { fl[1] != 0 -> land(1) }
  :: atomic { fl[2] != 0 -> land(2) }
#if H == 3
  :: atomic { fl[3] != 0 -> land(3) }
#endif
#endif
  od
}

#ifdef LIVE
/* With a host alive, every lease is eventually owned and read: lineage 0 to the end of its child (the parent
 * replaced and deleted), lineage 1 to its end, each checkpointed there. */
#ifdef ONE_LEASE
#define READ_ALL (!ex[0] && ex[2] && ck[2] == MAXPOS)
#else
#define READ_ALL (!ex[0] && ex[2] && ck[2] == MAXPOS && ck[1] == MAXPOS)
#endif
ltl read_all { <> READ_ALL }
#endif

init {
  atomic {
    byte h, l, k;
    for (h : 1 .. H) {
      alive[h] = 1;
      for (l : 0 .. NL - 1) { hdl[I(h, l)] = NONE; aage[l] = NONE }
    };
#ifdef WALL_CLOCKS
    for (h : 1 .. H) { if :: off[h] = 0 :: off[h] = SKEW fi };
#endif
    /* bootstrap (coordinator/bootstrap.ts): the host holding .lock creates one lease per partition; it may
     * claim them (owner = itself, epoch 1, deadline from their creates) or leave them free (epoch 0). */
    ex[0] = 1;
#ifndef ONE_LEASE
    ex[1] = 1;          /* the second lease (lineage 1); -DONE_LEASE checks lineage 0 and its split alone */
#endif
    if
    :: skip
    :: own[0] = 1; own[1] = ex[1]; ep[0] = 1; ep[1] = ex[1]; 
       start(1, 0, USABLE);
       if :: ex[1] -> start(1, 1, USABLE) :: else -> skip fi
    fi;
    written(0, 1); written(1, 1);   /* the creates are the leases' first versions */
    h = 0; l = 0; k = 0;
    run Clock();
    for (h : 1 .. H) { run Host(h) }
  }
}
