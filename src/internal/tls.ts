/**
 * TLS to PostgreSQL with libpq's meanings, not node-postgres's.
 *
 * node-postgres (its pg-connection-string 2.9) reads `sslmode=require`,
 * `prefer` and `verify-ca` from a URL as `verify-full` (the chain and the host
 * name checked against Node's root certificates) unless the URL also says
 * `uselibpqcompat=true`, and it can neither fall back from TLS to plain
 * (`prefer`) nor the other way (`allow`). So Docket reads the TLS settings
 * itself, from the URL, `Database.Options.tls` and libpq's environment
 * variables, takes them out of the URL it hands to pg, and gives pg explicit
 * TLS options; the pool, the LISTEN connection and the cancel connection all
 * use the same ones (Database.ts; listen.ts copies the pool's).
 *
 * Where Docket differs from libpq, on purpose (docs/operations.md, "TLS"):
 * with no sslmode anywhere it does not use TLS (libpq's default is `prefer`,
 * node-postgres's is none: an application's behaviour does not change under
 * it); `allow` and `prefer` are decided once, when the layer connects first,
 * not per connection; a certificate or key file named that cannot be read
 * fails the layer (libpq goes on without verifying when a named root
 * certificate file is missing); settings node-postgres has nothing for
 * (`sslcrl`, `sslcertmode`, ...) are refused instead of ignored.
 */
import { createPrivateKey, X509Certificate } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { homedir } from "node:os"
import { join } from "node:path"

/** libpq's `sslmode` values, weakest first. */
export type SslMode = "disable" | "allow" | "prefer" | "require" | "verify-ca" | "verify-full"
const MODES: ReadonlyArray<SslMode> = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]

/**
 * TLS settings given in code (`Database.Options.tls`), each the URL
 * parameter of the same meaning. A certificate or key is a file's path or
 * the PEM text itself. A setting given both here and in the URL must agree.
 */
export interface TlsOptions {
  /** `sslmode`. */
  readonly mode?: SslMode | undefined
  /** `sslrootcert`: the CA certificates that verify the server's, or "system" (the roots Node trusts). */
  readonly rootCert?: string | undefined
  /** `sslcert`: a client certificate, for servers that ask for one (`clientcert`, `cert` in pg_hba.conf). */
  readonly cert?: string | undefined
  /** `sslkey`: the client certificate's private key. */
  readonly key?: string | undefined
  /** `sslpassword`: the passphrase of an encrypted `sslkey`. */
  readonly password?: string | undefined
}

/**
 * The options of Node's `tls.connect` Docket sets (its own type: Docket's
 * declarations name no Node module, so an application's tsc needs no @types/node).
 */
export interface TlsConnect {
  ca?: string
  cert?: string
  key?: string
  passphrase?: string
  rejectUnauthorized: boolean
  checkServerIdentity?: () => undefined
}

/** What a connection is made with: no TLS, or these options for `tls.connect`. */
export type Ssl = false | TlsConnect

/** The TLS settings resolved for one database URL. */
export interface Resolved {
  /** The URL without its TLS parameters: pg must not read them (it would apply its own meanings). */
  readonly url: string
  readonly mode: SslMode
  /** Where the mode comes from, for messages: `sslmode=require`, `tls.mode=require`, `PGSSLMODE=require`, `no sslmode (no TLS)` */
  readonly modeSource: string
  /** What to connect with, in order: `allow` and `prefer` have two; the first that connects is kept. */
  readonly attempts: ReadonlyArray<Ssl>
  /** Where the CA certificates come from, as a person wrote it (for messages); none when not verifying. */
  readonly rootSource: string | undefined
  /** Where the client certificate comes from (for messages); none when there is none. */
  readonly certSource?: string | undefined
  /** The host connected to (for messages). */
  readonly host: string
}

// The settings, by their URL name: the option and the environment variable libpq reads for each.
const SETTINGS = {
  sslmode: { option: "mode", env: "PGSSLMODE" },
  sslrootcert: { option: "rootCert", env: "PGSSLROOTCERT" },
  sslcert: { option: "cert", env: "PGSSLCERT" },
  sslkey: { option: "key", env: "PGSSLKEY" },
  sslpassword: { option: "password", env: undefined }
} as const
type Setting = keyof typeof SETTINGS

// libpq's TLS settings node-postgres has nothing for: refused, never silently ignored.
const UNSUPPORTED = ["sslcrl", "sslcrldir", "sslcertmode", "sslsni", "ssl_min_protocol_version", "ssl_max_protocol_version"]
// node-postgres's own parameters: `ssl` is read below; `uselibpqcompat` asks for what Docket always does.
const STRIPPED = new Set<string>([...Object.keys(SETTINGS), "ssl", "uselibpqcompat"])

/** Where a setting was found, and its value. */
interface Found {
  readonly value: string
  /** For messages: `sslrootcert=/etc/ca.crt`, `tls.rootCert (PEM text)`, `PGSSLROOTCERT=/etc/ca.crt`, `sslpassword` */
  readonly source: string
  /** `the URL`, `Database.Options`, `the environment` */
  readonly origin: string
  /** Its URL name, for the error (`sslrootcert`, ...). */
  readonly setting: string
}

const found = (setting: string, value: string, label: string, origin: string): Found => ({
  setting,
  value,
  origin,
  source: /password/i.test(label) ? label : isPem(value) ? `${label} (PEM text)` : `${label}=${value}`
})

const isPem = (value: string) => value.trimStart().startsWith("-----BEGIN")

/** Where libpq looks when no setting names a file (only used if the file exists). */
export interface Defaults {
  readonly env: Readonly<Record<string, string | undefined>>
  /** The folder of libpq's default files (`~/.postgresql`). */
  readonly dir: string
}

const systemDefaults = (): Defaults => ({ env: process.env, dir: join(homedir(), ".postgresql") })

/** Reads the TLS settings of `url` (with `options` and the environment): the URL for pg and what to connect with, or why not. */
export const resolve = (
  url: string,
  options: TlsOptions = {},
  defaults: Defaults = systemDefaults()
): { readonly ok: Resolved } | { readonly error: Refused } => {
  try {
    return { ok: resolveOrThrow(url, options, defaults) }
  } catch (error) {
    if (error instanceof Refused) return { error }
    throw error
  }
}

/** A TLS setting that cannot be used: `setting` is its URL name (sslmode, sslrootcert, ...). Nothing was connected. */
export class Refused extends Error {
  constructor(readonly setting: string, message: string) {
    super(message)
  }
}

const resolveOrThrow = (url: string, options: TlsOptions, defaults: Defaults): Resolved => {
  const { rest, params } = splitQuery(url)
  for (const name of UNSUPPORTED) {
    if (params.has(name)) {
      throw new Refused(name, `${name} is not supported by Docket (node-postgres has no such setting): remove it from the URL`)
    }
  }
  const find = (name: Setting): Found | undefined => {
    const inUrl = params.get(name)
    const option = options[SETTINGS[name].option]
    if (inUrl !== undefined && option !== undefined && inUrl !== option) {
      throw new Refused(name, `${name} is given twice, differently: in the URL and as Database.Options tls.${SETTINGS[name].option}: give it once`)
    }
    const env = SETTINGS[name].env
    const fromEnv = env === undefined ? undefined : defaults.env[env]
    if (inUrl !== undefined) return found(name, inUrl, name, "the URL")
    if (option !== undefined) return found(name, option, `tls.${SETTINGS[name].option}`, "Database.Options")
    if (env !== undefined && fromEnv !== undefined && fromEnv !== "") return found(name, fromEnv, env, "the environment")
    return undefined
  }
  const host = hostOf(rest, params)
  // node-postgres's own `ssl` parameter, read when no sslmode is in the URL or the options.
  const ssl = params.get("ssl")
  const modeGiven = find("sslmode")
  const modeFound = ssl !== undefined && modeGiven?.origin === "the environment" ? undefined : modeGiven
  const rootFound = find("sslrootcert")
  const mode = modeOf(modeFound, ssl, rootFound)
  // node-postgres's ssl=true verifies against Node's roots: sslrootcert=system.
  const legacy = modeFound === undefined && rootFound === undefined && mode === "verify-full"
  const root = legacy ? found("ssl", "system", "ssl=true, as sslrootcert", "the URL") : rootFound
  const modeSource = modeFound?.source ??
    (ssl !== undefined ? `ssl=${ssl}` : root !== undefined ? `${root.source}, as sslmode=verify-full` : "no sslmode (no TLS)")
  // libpq never uses TLS over a Unix socket, whatever sslmode says.
  if (mode === "disable" || host.startsWith("/")) {
    return { url: rest, mode: "disable", modeSource, attempts: [false], rootSource: undefined, host }
  }
  const tls = tlsOptions(mode, root, find("sslcert"), find("sslkey"), find("sslpassword"), defaults.dir)
  const attempts: ReadonlyArray<Ssl> = mode === "allow" ? [false, tls.options] : mode === "prefer" ? [tls.options, false] : [tls.options]
  return { url: rest, mode, modeSource, attempts, rootSource: tls.rootSource, certSource: tls.certSource, host }
}

// The URL's query parameters, and the URL without the TLS ones (the other
// parameters kept as written).
const splitQuery = (url: string): { rest: string; params: Map<string, string> } => {
  const at = url.indexOf("?")
  const params = new Map<string, string>()
  if (at < 0) return { rest: url, params }
  const kept: Array<string> = []
  for (const part of url.slice(at + 1).split("&")) {
    const eq = part.indexOf("=")
    const name = decode(eq < 0 ? part : part.slice(0, eq))
    params.set(name, decode(eq < 0 ? "" : part.slice(eq + 1)))
    if (!STRIPPED.has(name)) kept.push(part)
  }
  return { rest: kept.length === 0 ? url.slice(0, at) : `${url.slice(0, at)}?${kept.join("&")}`, params }
}

const decode = (text: string): string => {
  try {
    return decodeURIComponent(text.replace(/\+/g, " "))
  } catch {
    return text
  }
}

// The host as pg will read it: a `host` parameter wins over the URL's (a socket folder, say).
const hostOf = (rest: string, params: Map<string, string>): string => {
  const given = params.get("host")
  if (given !== undefined && given !== "") return given
  try {
    return decodeURIComponent(new URL(rest).hostname) || "localhost"
  } catch {
    return "localhost"
  }
}

// sslmode, else node-postgres's `ssl` parameter (true: its full
// verification; no-verify: libpq's require), else verify-full for
// sslrootcert=system (libpq 16's default with it), else no TLS (see the module doc).
const modeOf = (given: Found | undefined, ssl: string | undefined, root: Found | undefined): SslMode => {
  if (given !== undefined) {
    const mode = MODES.find((m) => m === given.value)
    if (mode === undefined) {
      const hint = given.value === "no-verify" ? " (node-postgres's no-verify is libpq's require)" : ""
      throw new Refused("sslmode", `sslmode: ${JSON.stringify(given.value)} (in ${given.origin}) is not one of ${MODES.join(", ")}${hint}`)
    }
    if (root?.value === "system" && mode !== "verify-full") {
      throw new Refused("sslrootcert", `sslrootcert=system needs sslmode=verify-full, not ${mode} (any CA's customer can get a certificate the public roots sign)`)
    }
    return mode
  }
  if (ssl !== undefined) {
    if (ssl === "true" || ssl === "1") return "verify-full"
    if (ssl === "no-verify") return "require"
    if (ssl === "false" || ssl === "0") return "disable"
    throw new Refused("ssl", `ssl: ${JSON.stringify(ssl)} is not true, false, 1, 0 or no-verify (node-postgres's parameter; libpq's is sslmode)`)
  }
  return root?.value === "system" ? "verify-full" : "disable"
}

/** A PEM text given as such, or read from the file named. */
const pem = (given: Found, what: string): string => {
  if (isPem(given.value)) return given.value
  try {
    return readFileSync(given.value, "utf8")
  } catch (error) {
    throw new Refused(given.setting, `${given.source}: cannot read the ${what}: ${(error as Error).message}`)
  }
}

// libpq's default file in ~/.postgresql, when it exists.
const byDefault = (dir: string, file: string, setting: string): Found | undefined => {
  const path = join(dir, file)
  return existsSync(path) ? { setting, value: path, source: `${path} (libpq's default ${setting})`, origin: "libpq's default" } : undefined
}

// Node's options for one mode: what is verified, and the client certificate.
const tlsOptions = (
  mode: SslMode,
  rootGiven: Found | undefined,
  certGiven: Found | undefined,
  keyGiven: Found | undefined,
  password: Found | undefined,
  dir: string
): { options: TlsConnect; rootSource: string | undefined; certSource: string | undefined } => {
  const root = rootGiven ?? byDefault(dir, "root.crt", "sslrootcert")
  if (root === undefined && (mode === "verify-ca" || mode === "verify-full")) {
    throw new Refused(
      "sslrootcert",
      `sslmode=${mode} needs the CA certificate that signed the server's: give sslrootcert=<file> ` +
        `(or sslrootcert=system for the public roots Node trusts); ${join(dir, "root.crt")} does not exist`
    )
  }
  // Without a root certificate: encrypted, nothing verified (libpq's require, prefer and allow).
  const options: TlsConnect = { rejectUnauthorized: root !== undefined }
  if (root !== undefined) {
    if (root.value !== "system") options.ca = checkedCertificate(root, "CA certificate")
    // libpq checks the host name only in verify-full; with a root certificate
    // every other mode verifies the chain alone.
    if (mode !== "verify-full") options.checkServerIdentity = () => undefined
  }
  const cert = certGiven ?? byDefault(dir, "postgresql.crt", "sslcert")
  const key = keyGiven ?? (cert === undefined ? undefined : byDefault(dir, "postgresql.key", "sslkey"))
  if (cert !== undefined || key !== undefined) Object.assign(options, clientCertificate(cert, key, password))
  return { options, rootSource: root?.source, certSource: cert?.source }
}

const checkedCertificate = (given: Found, what: string): string => {
  const text = pem(given, what)
  try {
    new X509Certificate(text)
  } catch (error) {
    throw new Refused(given.setting, `${given.source}: not a PEM certificate (${(error as Error).message})`)
  }
  return text
}

// The client certificate and its key, checked now (libpq checks both when it
// connects): a bad passphrase or a key of another certificate is said here,
// not as an OpenSSL error at every connection.
const clientCertificate = (cert: Found | undefined, key: Found | undefined, password: Found | undefined) => {
  if (cert === undefined) throw new Refused("sslcert", `${key!.source} is given without sslcert (the certificate it is the key of)`)
  if (key === undefined) throw new Refused("sslkey", `${cert.source} is given without sslkey (its private key)`)
  const certText = checkedCertificate(cert, "client certificate")
  const keyText = pem(key, "client key")
  let privateKey
  try {
    privateKey = createPrivateKey({ key: keyText, ...(password === undefined ? {} : { passphrase: password.value }) })
  } catch (error) {
    const why = password === undefined ? "it is encrypted and no sslpassword is given, or it is not a PEM key" : "wrong sslpassword, or not a PEM key"
    throw new Refused(password === undefined ? "sslkey" : "sslpassword", `${key.source}: cannot read the client key: ${why} (${(error as Error).message})`)
  }
  if (!new X509Certificate(certText).checkPrivateKey(privateKey)) {
    throw new Refused("sslkey", `${key.source} is not the private key of the certificate in ${cert.source}`)
  }
  return { cert: certText, key: keyText, ...(password === undefined ? {} : { passphrase: password.value }) }
}

// Node's codes for a chain that does not lead to a trusted CA.
const UNTRUSTED = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_SIGNATURE_FAILURE"
])

/**
 * A connection's failure in words that name the problem and the setting to
 * change (a TLS failure), or its own message (anything else).
 */
export const explain = (error: unknown, tls: Resolved): string => {
  const message = error instanceof Error ? error.message : String(error)
  const code = typeof error === "object" && error !== null && "code" in error ? String(error.code) : ""
  if (UNTRUSTED.has(code)) {
    const where = tls.rootSource ?? "sslrootcert"
    return where.endsWith("=system")
      ? `the server's certificate is not signed by a CA Node trusts (${where}; ${message}): give sslrootcert the CA that signed it`
      : `the server's certificate is not signed by the CA in ${where} (${message}): give sslrootcert the CA that signed the server's certificate`
  }
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID") {
    return `the server's certificate is not for the host ${JSON.stringify(tls.host)} (${tls.modeSource} checks the name; ${message}): ` +
      `connect by a name the certificate lists, or use sslmode=verify-ca to check the CA only`
  }
  if (code === "CERT_HAS_EXPIRED" || code === "CERT_NOT_YET_VALID") {
    return `the server's certificate is not valid now (${message}): renew the server's certificate`
  }
  if (/server does not support SSL/i.test(message)) {
    return `the server does not accept TLS (${tls.modeSource}): turn ssl on in its postgresql.conf, or use sslmode=prefer or disable`
  }
  if (/requires a valid client certificate/i.test(message)) {
    return `${message}: give sslcert and sslkey (a client certificate signed by a CA in the server's ssl_ca_file)`
  }
  const alert = /alert (unknown ca|bad certificate|certificate required|certificate unknown)/i.exec(message)
  if (alert !== null) {
    return `the server refused the client certificate in ${tls.certSource ?? "sslcert"} (its TLS alert: ${alert[1]}): ` +
      `give sslcert a certificate signed by a CA in the server's ssl_ca_file`
  }
  if (/no encryption/i.test(message) && tls.mode !== "require" && !tls.mode.startsWith("verify")) {
    return `${message} (${tls.modeSource}): the server accepts only TLS here, use sslmode=require or stronger`
  }
  return message
}

/**
 * Connects with each of `tls.attempts` in turn until one works (libpq's
 * allow and prefer; one attempt otherwise, not tried here) and gives what
 * worked; when none does, fails with every attempt's failure, explained.
 */
export const choose = async (tls: Resolved, connect: (ssl: Ssl) => Promise<void>): Promise<Ssl> => {
  if (tls.attempts.length === 1) return tls.attempts[0]
  const failures: Array<string> = []
  for (const ssl of tls.attempts) {
    try {
      await connect(ssl)
      return ssl
    } catch (error) {
      failures.push(`${ssl === false ? "without TLS" : "with TLS"}: ${explain(error, tls)}`)
    }
  }
  throw new Error(`${tls.modeSource} tried both: ${failures.join("; ")}`)
}
