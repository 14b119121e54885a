/**
 * A plain JavaScript task file whose kind has dots: this file runs items of
 * kind `thumbnail.render`. It does a little CPU work (a hash of a fake image).
 */
import { createHash } from "node:crypto"

export default async (payload) => {
  const size = Math.min(4096, Math.max(16, Number(payload?.width ?? 256)))
  const pixels = Buffer.alloc(size * size, 7)
  createHash("sha256").update(pixels).digest("hex")
  await new Promise((resolve) => setTimeout(resolve, 150))
}
