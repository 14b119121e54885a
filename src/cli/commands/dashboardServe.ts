/**
 * The serving half of `docket dashboard`, loaded only when the command runs:
 * the HTTP server and the dashboard's modules (@effect/platform's router and
 * Node server) cost every other command about half a second of start-up when
 * imported with the command's options (1.16 s -> 1.71 s for `docket stats`).
 */
import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { createServer } from "node:http"
import { isIPv4, isIPv6 } from "node:net"
import * as Dashboard from "../../Dashboard.js"
import * as Docket from "../../Docket.js"
import { InvalidInput } from "../../Errors.js"
import { usage } from "../errors.js"
import { type DatabaseArgs, databaseOptions, databaseUrl } from "../options.js"
import { refuseMissing } from "../queue.js"

/**
 * The Host names a dashboard bound to `listenHost` answers to when that is a
 * loopback address (the loopback names and the address itself: all of
 * 127.0.0.0/8, ::1 however written), so that no DNS-rebinding page can read
 * it; undefined (any name) when it listens on another address.
 */
export const loopbackHosts = (listenHost: string): ReadonlyArray<string> | undefined => {
  const bare = listenHost.replace(/^\[(.*)\]$/, "$1")
  let name: string
  try {
    // The URL parser's canonical form: 127.1 -> 127.0.0.1, 0:0:0:0:0:0:0:1 -> [::1], LOCALHOST -> localhost.
    name = new URL(`http://${isIPv6(bare) ? `[${bare}]` : bare}/`).hostname
  } catch {
    return undefined
  }
  if (name === "localhost" || name === "[::1]") return Dashboard.LOOPBACK_HOSTS
  return isIPv4(name) && name.startsWith("127.") ? [...Dashboard.LOOPBACK_HOSTS, name] : undefined
}

/** What the command was given. */
export interface ServeArgs {
  readonly database: DatabaseArgs
  readonly port: Option.Option<number>
  readonly host: Option.Option<string>
  readonly basePath: Option.Option<string>
  readonly publicOrigin: Option.Option<string>
  readonly token: string | undefined
  /** When the overview and /metrics name who holds back the xmin horizon (PostgreSQL). */
  readonly horizon: Dashboard.Options["horizon"]
}

/** Serves until interrupted (SIGINT/SIGTERM). */
export const serve = ({ basePath, database, horizon, host, port, publicOrigin, token }: ServeArgs) =>
  Effect.gen(function*() {
    const url = databaseUrl(database)
    yield* refuseMissing(url)
    const listenHost = Option.getOrElse(host, () => "127.0.0.1")
    const options: Dashboard.Options = {
      basePath: Option.getOrUndefined(basePath),
      publicOrigin: Option.getOrUndefined(publicOrigin),
      token,
      database: url,
      horizon,
      // Bound to this machine only: answer only to its loopback names (no DNS rebinding).
      allowedHosts: loopbackHosts(listenHost)
    }
    // Checked before anything opens: a bad base path, token or public origin is bad usage (exit 2).
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
      Layer.provide(Docket.layerClient(url, {
        databaseOptions: { ...databaseOptions(database), maxConnections: 3, applicationName: "docket dashboard" }
      }))
    ))
  })
