/**
 * Traces and metrics with OpenTelemetry: Docket under @effect/opentelemetry,
 * exporting over OTLP/HTTP (JSON) to a collector (an OpenTelemetry Collector,
 * Jaeger, Grafana Tempo, ...). Two "requests" each enqueue a welcome mail; the
 * worker pool runs them. Under an application's tracer Docket makes a
 * `docket.enqueue` span (a child of the request's span) and stores its span
 * context with the item; the run's `docket.item` span links to it, so the
 * trace reads request -> enqueue -> run even when another process runs the
 * item. Docket's metrics (`docket_items_claimed`, `_completed`,
 * `docket_item_duration_ms`, ...) are exported beside the spans.
 *
 *   npx tsx examples/otel.ts
 *
 * OTEL_EXPORTER_OTLP_ENDPOINT is the collector (default
 * http://127.0.0.1:4318; traces go to /v1/traces, metrics to /v1/metrics);
 * DOCKET_DATABASE_URL the queue (default a SQLite file in a temporary
 * directory). Everything is flushed to the collector when the program ends
 * (the SDK's layer is released after the worker pool has stopped). Needs the
 * packages: @effect/opentelemetry (0.x, for Effect 3),
 * @opentelemetry/sdk-trace-base, @opentelemetry/sdk-metrics,
 * @opentelemetry/exporter-trace-otlp-http and
 * @opentelemetry/exporter-metrics-otlp-http.
 *
 * Prints one line per mail sent with its trace id, then where the telemetry went.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-http"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics"
import { BatchSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { NodeRuntime } from "@effect/platform-node"
import { Docket, Handler, Worker } from "docket"
import { Console, Effect, Layer, Option, Queue, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const endpoint = (process.env.OTEL_EXPORTER_OTLP_ENDPOINT ?? "http://127.0.0.1:4318").replace(/\/+$/, "")

// The OpenTelemetry SDK as a layer: spans in batches, metrics every 10 s (and
// once more at shutdown), both as OTLP/HTTP JSON.
const Telemetry = NodeSdk.layer(() => ({
  resource: { serviceName: "docket-otel-example" },
  spanProcessor: new BatchSpanProcessor(new OTLPTraceExporter({ url: `${endpoint}/v1/traces` })),
  metricReader: new PeriodicExportingMetricReader({
    exporter: new OTLPMetricExporter({ url: `${endpoint}/v1/metrics` }),
    exportIntervalMillis: 10_000
  })
}))

const Welcome = Handler.make("mail.welcome", {
  payload: Schema.Struct({ to: Schema.String }),
  run: ({ to }, job) =>
    // The handler runs inside the item's span: its own spans are its children.
    Effect.flatMap(Effect.currentSpan.pipe(Effect.option), (span) =>
      Console.log(
        `welcome mail sent to ${to} (item ${job.id}, trace ${Option.match(span, { onNone: () => "-", onSome: (s) => s.traceId })})`
      )).pipe(Effect.withSpan("smtp.send", { attributes: { to } }))
})

// What a request handler does: its span is the trace's root here.
const signup = (email: string) =>
  Docket.client(Welcome).enqueue({ to: email }).pipe(
    Effect.withSpan("POST /signup", { kind: "server", attributes: { "user.email": email } })
  )

const program = Effect.gen(function*() {
  const events = yield* Effect.flatMap(Worker.Worker, (worker) => worker.subscribe)
  yield* signup("ada@example.com")
  yield* signup("grace@example.com")
  for (let done = 0; done < 2;) if ((yield* Queue.take(events))._tag === "Completed") done++
  yield* Console.log(`traces and metrics exported to ${endpoint} (flushed at shutdown)`)
})

const main = Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "docket-otel-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )
  const database = process.env.DOCKET_DATABASE_URL ?? join(dir, "queue.db")
  // The SDK is built first and released last: the pool's last spans are
  // ended before the exporters flush.
  const Live = Docket.layer({ database, handlers: [Welcome] }).pipe(Layer.provide(Telemetry))
  yield* program.pipe(Effect.scoped, Effect.provide(Live))
}).pipe(Effect.scoped)

NodeRuntime.runMain(main)
