/**
 * Keeping a git mirror up to date: every push to a repository enqueues a
 * "mirror.refresh" with the repository as its dedupe key, and the worker runs
 * `git push --mirror` to a bare mirror. Real `git`, in a temporary folder.
 *
 * What it shows:
 * - a burst of pushes while a refresh WAITS collapses into one refresh (dedupe);
 * - the mirror is missing at first: the refresh fails, is retried after a
 *   short backoff, and succeeds once the mirror exists;
 * - a push that arrives while a refresh RUNS is not lost: the running refresh
 *   does not stand for it (it may have read the repository before the push),
 *   so a new refresh is queued and runs after it.
 *
 *   npx tsx examples/git-mirror.ts
 */
import { NodeRuntime } from "@effect/platform-node"
import { Backoff, Docket, Handler, Retry, Worker } from "docket"
import { Console, Deferred, Effect, Queue, Schema } from "effect"
import { execFile } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** Runs git; fails with its stderr. */
const git = (cwd: string, ...args: Array<string>) =>
  Effect.async<string, Error>((resume) => {
    execFile(
      "git",
      ["-c", "user.name=Docket Example", "-c", "user.email=docket@example.com", "-c", "init.defaultBranch=main", ...args],
      { cwd, env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", GIT_TERMINAL_PROMPT: "0" } },
      (error, stdout, stderr) =>
        resume(
          error
            ? Effect.fail(new Error(stderr.split("\n").find((l) => l.startsWith("fatal:")) ?? error.message))
            : Effect.succeed(stdout.trim())
        )
    )
  })

const commit = (repo: string, file: string, text: string) =>
  Effect.gen(function*() {
    yield* Effect.sync(() => writeFileSync(join(repo, file), text))
    yield* git(repo, "add", file)
    yield* git(repo, "commit", "-q", "-m", `update ${file}`)
    return yield* git(repo, "rev-parse", "--short", "HEAD")
  })

const main = Effect.gen(function*() {
  const root = yield* Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "docket-git-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )
  const source = join(root, "repos", "app")
  const mirror = join(root, "mirrors", "app.git")
  yield* Effect.sync(() => mkdirSync(source, { recursive: true }))
  yield* git(source, "init", "-q")
  const first = yield* commit(source, "README.md", "# app\n")
  yield* Console.log(`repository app at ${first}; its mirror does not exist yet`)

  // The first successful refresh pauses after its push until told to go on, so
  // that a push can arrive while it runs (in a real system this is just timing).
  const pushed = yield* Deferred.make<void>()
  const goOn = yield* Deferred.make<void>()
  let pauseOnce = true

  const Refresh = Handler.make("mirror.refresh", {
    payload: Schema.Struct({ repo: Schema.String }),
    backoff: Backoff.constant("300 millis"),
    run: ({ repo }, job) =>
      Effect.gen(function*() {
        const from = join(root, "repos", repo)
        const to = join(root, "mirrors", `${repo}.git`)
        yield* git(from, "push", "-q", "--mirror", to).pipe(
          Effect.mapError((error) => new Retry({ reason: `git push --mirror: ${error.message}` }))
        )
        const head = yield* git(to, "rev-parse", "--short", "main").pipe(Effect.orDie)
        yield* Console.log(`refresh #${job.id} (attempt ${job.attempt}): mirror of ${repo} now at ${head}`)
        if (pauseOnce) {
          pauseOnce = false
          yield* Deferred.succeed(pushed, undefined)
          yield* Deferred.await(goOn)
        }
      })
  })

  const program = Effect.gen(function*() {
    const worker = yield* Worker.Worker
    const events = yield* worker.subscribe
    const refresh = Docket.client(Refresh)
    const onPush = (repo: string) => refresh.enqueue({ repo }, { key: repo })

    // A burst of pushes while the refresh waits: one refresh.
    const burst = yield* Effect.forEach([1, 2, 3], () => onPush("app"))
    yield* Console.log(
      `3 pushes to app: ${burst.map((r) => `${r._tag.toLowerCase()} #${r.id}`).join(", ")} (one refresh waits for all three)`
    )

    // The mirror is missing: the refresh fails and is retried. Create the mirror meanwhile.
    for (;;) {
      const event = yield* Queue.take(events)
      if (event._tag === "Retried") {
        yield* Console.log(`refresh #${event.claim.id} failed (${event.error}); creating the mirror, retry follows`)
        yield* Effect.sync(() => mkdirSync(mirror, { recursive: true }))
        yield* git(mirror, "init", "-q", "--bare")
        break
      }
    }

    // While the retried refresh runs (after its push), another push arrives.
    yield* Deferred.await(pushed)
    const second = yield* commit(source, "CHANGES.md", "- second change\n")
    const during = yield* onPush("app")
    yield* Console.log(
      `push of ${second} while refresh #${burst[0].id} runs: ${during._tag.toLowerCase()} #${during.id} (a new refresh, not merged into the running one)`
    )
    yield* Deferred.succeed(goOn, undefined)

    // Both refreshes complete; the mirror has the second push.
    const completed = new Set<number>()
    while (!completed.has(burst[0].id) || !completed.has(during.id)) {
      const event = yield* Queue.take(events)
      if (event._tag === "Completed") completed.add(event.claim.id)
      if (event._tag === "Dead") return yield* Effect.die(new Error(`refresh ${event.claim.id} dead: ${event.error}`))
    }
    const sourceHead = yield* git(source, "rev-parse", "--short", "HEAD")
    const mirrorHead = yield* git(mirror, "rev-parse", "--short", "main")
    if (sourceHead !== mirrorHead) return yield* Effect.die(new Error(`mirror at ${mirrorHead}, source at ${sourceHead}`))
    yield* Console.log(
      `mirror of app at ${mirrorHead}, the same as the repository: the push during the refresh was not lost`
    )
  })

  yield* program.pipe(
    Effect.scoped,
    Effect.provide(Docket.layer({ database: join(root, "queue.db"), handlers: [Refresh], concurrency: 2 }))
  )
}).pipe(Effect.scoped)

NodeRuntime.runMain(main)
