/**
 * A TCP proxy of the test's own (node:net), between workers and PostgreSQL,
 * that can make the network fail the way production networks do, where
 * nothing is refused and nothing answers:
 *
 * - `partition()`: nothing is forwarded in either direction, and every socket
 *   stays open (no RST, no FIN, no refusal). Bytes sent meanwhile are held, as
 *   a sender's TCP keeps them to retransmit; a new connection is accepted (the
 *   kernel's handshake) but not connected upstream until the heal.
 * - `heal()`: forwarding again, the held bytes first, in order (as TCP
 *   retransmission would deliver them).
 * - `delay(ms)`: every chunk from a client to the server (a statement) is
 *   forwarded `ms` after it arrived, in order per connection; answers are not
 *   delayed. `delay(0)` forwards at once again.
 * - `vanish()`: the server's host is gone (a power cut, a kernel panic, a
 *   partition that isolates it): every open connection goes silent for good
 *   (nothing forwarded, nothing closed: no RST, no FIN), and new connections
 *   wait, as in a partition.
 * - `switchTo(target)`: a failover's switch (what a virtual IP moved, a DNS
 *   name changed or HAProxy's health check does): every connection still
 *   forwarding is closed, the waiting ones connect to `target`, and so do new
 *   ones; the silent ones stay silent.
 *
 * A side that closes its socket closes the other side once everything held
 * for it is delivered (at once while forwarding, at the heal in a partition).
 */
import { createServer, type Server, type Socket, connect } from "node:net"

export interface Proxy {
  readonly port: number
  /** A URL like `url` with the proxy's host and port. */
  readonly url: (url: string) => string
  readonly partition: () => void
  readonly heal: () => void
  readonly delay: (ms: number) => void
  /** Silences every open connection for good; new ones wait (see above). */
  readonly vanish: () => void
  /** Closes the connections still forwarding, and sends waiting and new ones to `target`. */
  readonly switchTo: (target: Target) => void
  /** Connections accepted since the start, and open now. */
  readonly connections: () => { readonly accepted: number; readonly open: number }
  readonly close: () => Promise<void>
}

type Direction = "up" | "down"

/** Where the proxy connects. */
export interface Target {
  readonly host: string
  readonly port: number
}

/** One client connection and its upstream connection, with what is held for each way. */
class Pair {
  private upstream: Socket | undefined
  private readonly held: Record<Direction, Array<Buffer>> = { up: [], down: [] }
  private readonly ended: Record<Direction, boolean> = { up: false, down: false }
  private delayed = Promise.resolve()
  closed = false
  /** Silent for good (`vanish`): nothing is forwarded or closed until the proxy closes. */
  private silent = false

  constructor(
    private readonly client: Socket,
    private readonly target: () => Target,
    private readonly mode: () => { readonly partitioned: boolean; readonly delayMs: number },
    private readonly onClose: () => void
  ) {
    client.setNoDelay(true)
    client.on("data", (chunk) => this.fromClient(chunk))
    client.on("end", () => this.endFrom("up"))
    client.on("error", () => this.clientClosed())
    client.on("close", () => this.clientClosed())
    if (!mode().partitioned) this.open()
  }

  // The client closed: in a partition the server hears of it only at the heal
  // (after the bytes held for it), as its FIN would be retransmitted.
  private clientGone = false
  private clientClosed(): void {
    if (this.silent) return this.destroy()
    this.clientGone = true
    this.ended.up = true
    if (!this.mode().partitioned) this.resume()
  }

  /** Forwarding again: connects upstream if not yet, and delivers what is held. */
  resume(): void {
    if (this.closed || this.silent) return
    if (this.upstream === undefined) return this.clientGone ? this.destroy() : this.open()
    this.flush("up")
    if (this.clientGone) return
    this.flush("down")
  }

  /** Whether it forwards (or did): connected upstream, not silenced. */
  get forwarding(): boolean {
    return this.upstream !== undefined && !this.silent
  }

  /** Silent for good: the upstream side is dropped without a word to the client, whose bytes go nowhere. */
  silence(): void {
    if (this.closed || this.upstream === undefined) return
    this.silent = true
    const upstream = this.upstream
    upstream.removeAllListeners()
    upstream.on("error", () => {})
    upstream.destroy()
  }

  destroy(): void {
    if (this.closed) return
    this.closed = true
    this.client.destroy()
    this.upstream?.destroy()
    this.onClose()
  }

  private open(): void {
    const { host, port } = this.target()
    const upstream = connect(port, host)
    this.upstream = upstream
    upstream.setNoDelay(true)
    upstream.on("connect", () => this.flush("up"))
    upstream.on("data", (chunk) => this.push("down", chunk))
    upstream.on("end", () => this.endFrom("down"))
    upstream.on("error", () => this.destroy())
    upstream.on("close", () => this.destroy())
  }

  private fromClient(chunk: Buffer): void {
    if (this.silent) return
    const { delayMs } = this.mode()
    if (delayMs <= 0) return this.push("up", chunk)
    // In order: each chunk waits for the previous one, then for its own delay from arrival.
    const due = performance.now() + delayMs
    this.delayed = this.delayed.then(() =>
      new Promise<void>((resolve) =>
        setTimeout(() => {
          this.push("up", chunk)
          resolve()
        }, Math.max(0, due - performance.now()))
      )
    )
  }

  private push(direction: Direction, chunk: Buffer): void {
    this.held[direction].push(chunk)
    this.flush(direction)
  }

  private endFrom(direction: Direction): void {
    this.ended[direction] = true
    this.flush(direction)
  }

  // Delivers what is held for one way, unless partitioned (or not connected yet).
  private flush(direction: Direction): void {
    if (this.closed || this.silent || this.mode().partitioned) return
    const to = direction === "up" ? this.upstream : this.client
    if (to === undefined || to.connecting || to.destroyed) return
    const chunks = this.held[direction].splice(0)
    for (const chunk of chunks) to.write(chunk)
    if (this.ended[direction]) to.end()
  }
}

/** Starts a proxy on a free port of 127.0.0.1 to `target`. */
export const startProxy = async (initial: Target): Promise<Proxy> => {
  let target = initial
  let partitioned = false
  let delayMs = 0
  let accepted = 0
  const pairs = new Set<Pair>()
  const mode = () => ({ partitioned, delayMs })
  const server: Server = createServer((client) => {
    accepted++
    const pair: Pair = new Pair(client, () => target, mode, () => pairs.delete(pair))
    pairs.add(pair)
  })
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => resolve())
  })
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  return {
    port,
    url: (url) => {
      const u = new URL(url)
      u.hostname = "127.0.0.1"
      u.port = String(port)
      return u.toString()
    },
    partition: () => {
      partitioned = true
    },
    heal: () => {
      partitioned = false
      for (const pair of pairs) pair.resume()
    },
    delay: (ms) => {
      delayMs = ms
    },
    vanish: () => {
      partitioned = true
      for (const pair of pairs) pair.silence()
    },
    switchTo: (next) => {
      target = next
      partitioned = false
      for (const pair of [...pairs]) {
        if (pair.forwarding) pair.destroy()
        else pair.resume()
      }
    },
    connections: () => ({ accepted, open: pairs.size }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const pair of [...pairs]) pair.destroy()
        server.close(() => resolve())
      })
  }
}
