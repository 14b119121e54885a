/**
 * `docket dashboard`: serves the web dashboard, its JSON API and /metrics
 * over the queue's database until SIGINT/SIGTERM. Binds to 127.0.0.1 unless
 * --host says otherwise; read-only unless a token is given (--token, else
 * DOCKET_DASHBOARD_TOKEN).
 */
import { Command, Options } from "@effect/cli"
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Console, Effect, Layer, Option } from "effect"
import { createServer } from "node:http"
import * as Dashboard from "../../Dashboard.js"
import * as Docket from "../../Docket.js"
import { InvalidInput } from "../../Errors.js"
import { usage } from "../errors.js"
import { databaseOption, databaseUrl, integerOption, optionalText } from "../options.js"
import { refuseMissing } from "../queue.js"

const portOption = integerOption("port", `The port to listen on (default ${Dashboard.DEFAULT_PORT}; 0 picks a free one).`, {
  min: 0,
  max: 65535
}).pipe(Options.optional)

const hostOption = optionalText(
  "host",
  "host",
  "The address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 exposes it, give a token and put TLS in front)."
)

const basePathOption = optionalText("base-path", "path", "Serve under this path, e.g. /docket (default: at the root).")

const tokenOption = optionalText(
  "token",
  "token",
  `The token actions need (at least ${Dashboard.MIN_TOKEN_LENGTH} characters; default $DOCKET_DASHBOARD_TOKEN). ` +
    "Without one the dashboard is read-only."
)

const tokenOf = (option: Option.Option<string>): string | undefined =>
  Option.getOrElse(option, () => {
    const env = process.env.DOCKET_DASHBOARD_TOKEN
    return env !== undefined && env.trim() !== "" ? env.trim() : undefined
  })

const LOOPBACK = new Set(["127.0.0.1", "localhost", "::1", "[::1]"])

/** The command. */
export const dashboard = Command.make(
  "dashboard",
  { database: databaseOption, port: portOption, host: hostOption, basePath: basePathOption, token: tokenOption },
  ({ basePath, database, host, port, token }) =>
    Effect.gen(function*() {
      const url = databaseUrl(database)
      yield* refuseMissing(url)
      const listenHost = Option.getOrElse(host, () => "127.0.0.1")
      const options: Dashboard.Options = {
        basePath: Option.getOrUndefined(basePath),
        token: tokenOf(token),
        database: url,
        // Bound to this machine only: answer only to its loopback names (no DNS rebinding).
        allowedHosts: LOOPBACK.has(listenHost) ? Dashboard.LOOPBACK_HOSTS : undefined
      }
      // Checked before anything opens: a bad base path or token is bad usage (exit 2).
      const app = yield* Effect.try({
        try: () => Dashboard.layer(options),
        catch: (e) => usage(e instanceof InvalidInput ? e.reason : String(e))
      })
      const listen = { port: Option.getOrElse(port, () => Dashboard.DEFAULT_PORT), host: listenHost }
      const announce = Layer.effectDiscard(HttpServer.addressFormattedWith((address) =>
        Console.log(
          `docket dashboard listening on ${address}${options.basePath ?? ""}/ over ${Dashboard.describeDatabase(url)} (${
            options.token === undefined ? "read-only: no token" : "actions need the token"
          })`
        )
      ))
      return yield* Layer.launch(Layer.mergeAll(app, announce).pipe(
        Layer.provide(NodeHttpServer.layer(createServer, listen)),
        // A few connections: the dashboard reads one statement at a time, and
        // must not take the connections a database's workers need.
        Layer.provide(Docket.layerClient(url, { databaseOptions: { maxConnections: 3, applicationName: "docket dashboard" } }))
      ))
    })
).pipe(
  Command.withDescription(
    "Serves the web dashboard, its JSON API (/api) and Prometheus metrics (/metrics) over the queue's database " +
      "until SIGINT or SIGTERM; read-only without a token."
  )
)
