/** Probes shared by the adapters: one count query on a plain connection. */
import Database from "better-sqlite3"
import pg from "pg"
import type { Probe } from "./types.js"

/** A count of pending jobs on PostgreSQL (one connection, opened now). */
export const pgProbe = async (url: string, countSql: string): Promise<Probe> => {
  const client = new pg.Client({ connectionString: url, application_name: "bench-probe" })
  await client.connect()
  return {
    pending: async () => Number((await client.query(countSql)).rows[0].n),
    close: () => client.end()
  }
}

/** A count of pending jobs in a SQLite file (read-only; WAL lets it read beside the writer). */
export const sqliteProbe = async (file: string, countSql: string): Promise<Probe> => {
  const db = new Database(file, { readonly: true, fileMustExist: true })
  db.pragma("busy_timeout = 10000")
  const statement = db.prepare(countSql)
  return {
    pending: async () => Number((statement.get() as { n: number }).n),
    close: async () => {
      db.close()
    }
  }
}
