/**
 * The failover scenario's asynchronous case (registered by failover.ts): what
 * a failover loses, shown on purpose. The standby's WAL receiver is stopped
 * (it falls behind, as a lagging standby does), the old primary acknowledges
 * enqueues, a completion and a claim, then crashes and the standby is
 * promoted as it is: the enqueues are gone, the completed item is running
 * again under its old claim (it runs again once the lease ends), and the
 * lost claim's token is issued again to the next claim of its item, so the
 * old holder's completion is accepted for the new holder's run: the fencing
 * token no longer fences. Under synchronous replication the same enqueue is
 * not acknowledged while the standby is away.
 */
import { Duration, Effect, Either, ManagedRuntime } from "effect"
import { expect, it } from "vitest"
import * as Docket from "../../src/Docket.js"
import * as QueueRepo from "../../src/QueueRepo.js"
import { KIND, makePair, type Repo, SLOT, withRepo } from "./failoverSupport.js"
import { report, waitFor, withDatabase } from "./support.js"

export const asyncLossCase = () =>
  it("asynchronous replication: what the old primary acknowledged after the standby fell behind is lost", async () => {
    const made = await makePair()
    if (made === undefined) return
    const { primary, standby } = made
    const oldUrl = withDatabase(primary.adminUrl, "docket_rel")
    const newUrl = withDatabase(standby.adminUrl, "docket_rel")
    const old: Repo = ManagedRuntime.make(Docket.layerClient(oldUrl, { databaseOptions: { statementTimeout: "5 seconds" } }))
    let promoted: Repo | undefined
    let synced: Repo | undefined
    try {
      const lease = Duration.minutes(1)
      // Replicated: ten items, one of them (B) claimed.
      const before = await withRepo(old, (repo) =>
        repo.enqueueMany(Array.from({ length: 10 }, (_, i) => ({ kind: KIND, payload: { job: i + 1, ms: 1 } }))))
      const [claimB] = await withRepo(old, (repo) => repo.claim({ worker: "w-old", limit: 1, lease }))
      const lsn = await primary.query((c) => c.query<{ lsn: string }>("SELECT pg_current_wal_lsn()::text AS lsn"))
      await waitFor("the standby replayed everything so far", async () =>
        (await standby.query((c) =>
          c.query("SELECT 1 FROM pg_stat_wal_receiver WHERE pg_last_wal_replay_lsn() >= $1::pg_lsn", [lsn.rows[0].lsn])
        )).rowCount === 1, 30_000, 20)

      // The standby falls behind: its WAL receiver stops (an empty primary_conninfo).
      await standby.reconfigure({ primary_conninfo: "" })
      await waitFor("the standby's receiver stopped", async () =>
        (await primary.query((c) => c.query("SELECT 1 FROM pg_stat_replication"))).rowCount === 0, 30_000, 20)

      // Acknowledged by the old primary, never sent to the standby.
      const after = await withRepo(old, (repo) =>
        repo.enqueueMany(Array.from({ length: 10 }, (_, i) => ({ kind: KIND, payload: { job: 100 + i, ms: 1 } }))))
      const completedB = await withRepo(old, (repo) => repo.complete(claimB))
      const [claimC] = await withRepo(old, (repo) => repo.claim({ worker: "w-old", limit: 1, lease }))

      // The same enqueue under synchronous replication: not acknowledged while
      // the standby is away (its commit waits for the standby's flush).
      // pg_reload_conf() only signals: a session of `old`'s pool applies the
      // setting at a command after the signal reaches it, so an enqueue sent
      // at once could still commit without waiting (seen once, in a run of
      // the crash suite on a loaded machine: acknowledged in 2 ms). So: wait
      // until a new session has it,
      // and enqueue through a pool whose sessions start after that, first
      // reading through it (a layer that wrote on start would hang there,
      // failing the test rather than passing it for the wrong reason).
      await primary.reconfigure({ synchronous_standby_names: `"${SLOT}"` })
      await waitFor("the primary's new sessions wait for the standby", async () =>
        (await primary.query((c) => c.query<{ s: string }>("SELECT current_setting('synchronous_standby_names') AS s"))).rows[0].s.includes(SLOT), 30_000, 20)
      // Disposed after the crash, with the others: its pool's session is
      // waiting on the standby until then.
      synced = ManagedRuntime.make(Docket.layerClient(oldUrl, { databaseOptions: { statementTimeout: "5 seconds" } }))
      await synced.runPromise(Effect.timeout(Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.stats), "10 seconds"))
      const waitedAt = Date.now()
      const syncEnqueue = await synced.runPromise(Effect.either(Effect.timeout(
        Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.enqueue(KIND, { job: 999, ms: 1 })),
        "2 seconds"
      )))
      const syncWaitedMs = Date.now() - waitedAt

      // The crash, and the promotion of the standby as it is.
      await primary.stop("immediate")
      await standby.promote()
      const runtime: Repo = ManagedRuntime.make(Docket.layerClient(newUrl))
      promoted = runtime
      const items = await withRepo(runtime, (repo) => repo.getMany([...before, ...after].map((r) => r.id)))
      const itemB = items.find((i) => i.id === claimB.id)
      const survivingAfter = items.filter((i) => after.some((a) => a.id === i.id)).length
      const job999 = Number((await standby.query((c) =>
        c.query<{ n: string }>("SELECT count(*) AS n FROM docket_items_all WHERE (payload::jsonb->>'job')::int = 999"), "docket_rel"
      )).rows[0].n)
      // The next claim takes C again, with the token the lost claim had.
      const [claimAgain] = await withRepo(runtime, (repo) => repo.claim({ worker: "w-new", limit: 1, lease }))
      // The old holder of C completes it: accepted, over w-new's run.
      const staleCompleted = await withRepo(runtime, (repo) => repo.complete(claimC))
      report("failover (asynchronous standby behind, promoted)", {
        acknowledgedAfterStandbyStopped: after.length,
        survivingAfterFailover: survivingAfter,
        completedOnOldPrimary: completedB,
        stateOfCompletedItem: itemB?.state ?? "missing",
        syncEnqueueAcknowledged: Either.isRight(syncEnqueue),
        syncEnqueueWaitedMs: syncWaitedMs,
        syncEnqueueStored: job999,
        lostClaimToken: claimC.token,
        reclaimedItemSame: claimAgain?.id === claimC.id,
        reclaimedToken: claimAgain?.token ?? -1,
        staleHolderCompletionAccepted: staleCompleted
      })
      // Lost: every enqueue acknowledged after the standby stopped receiving.
      expect(after).toHaveLength(10)
      expect(survivingAfter).toBe(0)
      // A completion acknowledged, undone: the item is running again under its old claim (it runs again after the lease).
      expect(completedB).toBe(true)
      expect(itemB?.state).toBe("running")
      // A lost claim's token issued again: the stale holder's write is accepted.
      expect(claimAgain?.id).toBe(claimC.id)
      expect(claimAgain?.token).toBe(claimC.token)
      expect(staleCompleted).toBe(true)
      // Synchronous: the enqueue never returned while the standby was away, and is not there after.
      expect(Either.isLeft(syncEnqueue)).toBe(true)
      expect(job999).toBe(0)
    } finally {
      await old.dispose().catch(() => undefined)
      await promoted?.dispose().catch(() => undefined)
      await synced?.dispose().catch(() => undefined)
      await Promise.all([primary.destroy(), standby.destroy()])
    }
  }, 120_000)
