/**
 * Sending mail: try at once, queue only on failure (`Docket.attemptOrEnqueue`).
 *
 * A real SMTP server (smtp-server, on a loopback port) refuses the first
 * delivery to each of two busy mailboxes with "451 try again later";
 * nodemailer sends. A signup's welcome
 * mail is sent at once when the server takes it; when it refuses, the mail
 * is queued and the worker delivers it after a short backoff.
 *
 *   npx tsx examples/mail.ts
 *
 * Prints what happened to each mail, then the messages the server received.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Backoff, Docket, Handler, Retry, Worker } from "docket"
import { Console, Context, Effect, Layer, Queue, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import nodemailer from "nodemailer"
import { SMTPServer } from "smtp-server"

// --- a mail server on a loopback port whose busy mailboxes refuse their first delivery ---

interface Received {
  readonly to: string
  readonly subject: string
}

const smtpServer = (busy: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.async<{ port: number; received: Array<Received>; server: SMTPServer }>((resume) => {
      const received: Array<Received> = []
      // Per mailbox, not per delivery: the worker's retry of one mail may reach
      // the server before the next signup's first try does.
      const refuseOnce = new Set(busy)
      const server = new SMTPServer({
        authOptional: true,
        disabledCommands: ["STARTTLS"],
        logger: false,
        onData(stream, session, callback) {
          let data = ""
          stream.setEncoding("utf8")
          stream.on("data", (chunk: string) => (data += chunk))
          stream.on("end", () => {
            const to = session.envelope.rcptTo.map((r) => r.address).join(", ")
            if (refuseOnce.delete(to)) {
              return callback(Object.assign(new Error("mailbox busy, try again later"), { responseCode: 451 }))
            }
            const subject = /^Subject: (.*)$/m.exec(data)?.[1]?.trim() ?? ""
            received.push({ to, subject })
            callback(null, "queued")
          })
        }
      })
      server.listen(0, "127.0.0.1", () => {
        const port = ((server as unknown as { server: { address(): AddressInfo } }).server.address()).port
        resume(Effect.succeed({ port, received, server }))
      })
    }),
    ({ server }) => Effect.async<void>((resume) => server.close(() => resume(Effect.void)))
  )

// --- the application's mailer, as a service ---

interface Mail {
  readonly to: string
  readonly subject: string
  readonly text: string
}

class Mailer extends Context.Tag("examples/Mailer")<Mailer, {
  readonly send: (mail: Mail) => Effect.Effect<void, Error>
}>() {}

const mailerLayer = (port: number) =>
  Layer.scoped(
    Mailer,
    Effect.acquireRelease(
      Effect.sync(() => nodemailer.createTransport({ host: "127.0.0.1", port, secure: false, ignoreTLS: true })),
      (transport) => Effect.sync(() => transport.close())
    ).pipe(
      Effect.map((transport) => ({
        send: (mail: Mail) =>
          Effect.tryPromise({
            try: () => transport.sendMail({ from: "hello@example.com", ...mail }),
            catch: (error) => error as Error
          }).pipe(Effect.asVoid)
      }))
    )
  )

// --- the handler: the queued form of "send this mail" ---

const SendMail = Handler.make("mail.send", {
  payload: Schema.Struct({ to: Schema.String, subject: Schema.String, text: Schema.String }),
  backoff: Backoff.constant("50 millis"),
  maxAttempts: 5,
  run: (mail, job) =>
    Effect.flatMap(Mailer, (mailer) => mailer.send(mail)).pipe(
      Effect.tap(() => Console.log(`${mail.to}: delivered by the worker (item ${job.id}, attempt ${job.attempt})`)),
      Effect.mapError((error) => new Retry({ reason: error.message }))
    )
})

const signUp = (name: string, to: string) =>
  Effect.gen(function*() {
    const mail = { to, subject: `Welcome, ${name}!`, text: `Hello ${name}, thanks for signing up.` }
    const mailer = yield* Mailer
    // Try now; on failure, queue it (the same payload) for the worker.
    const result = yield* Docket.attemptOrEnqueue(mailer.send(mail), SendMail, mail)
    yield* Console.log(
      result._tag === "Done"
        ? `${to}: delivered at once`
        : `${to}: delivery failed (${result.error}); queued as item ${result.result.id} for retry`
    )
    return result._tag
  })

const main = Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "docket-mail-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )
  const server = yield* smtpServer(["ada@example.com", "grace@example.com"])
  yield* Console.log(`mail server on 127.0.0.1:${server.port} (refuses the first 2 deliveries: ada's and grace's mailboxes are busy)`)
  const MailerLive = mailerLayer(server.port)
  const DocketLive = Docket.layer({ database: join(dir, "queue.db"), handlers: [SendMail] })

  yield* Effect.gen(function*() {
    const events = yield* Effect.flatMap(Worker.Worker, (worker) => worker.subscribe)
    const outcomes = []
    for (const [name, to] of [["Ada", "ada@example.com"], ["Grace", "grace@example.com"], ["Alan", "alan@example.com"]]) {
      outcomes.push(yield* signUp(name, to))
    }
    const queued = outcomes.filter((o) => o === "Queued").length
    let delivered = 0
    while (delivered < queued) {
      const event = yield* Queue.take(events)
      if (event._tag === "Completed") delivered++
      if (event._tag === "Dead") return yield* Effect.die(new Error(`mail ${event.claim.id} is dead: ${event.error}`))
    }
  }).pipe(Effect.scoped, Effect.provide(DocketLive.pipe(Layer.provideMerge(MailerLive))))

  yield* Console.log(`the mail server received ${server.received.length} messages:`)
  for (const m of server.received) yield* Console.log(`  to ${m.to}: ${m.subject}`)
}).pipe(Effect.scoped)

NodeRuntime.runMain(main)
