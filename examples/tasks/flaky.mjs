/**
 * A plain JavaScript task file: the default export is an async function of
 * the payload and the job. A throw (or a rejected promise) is a retry, after
 * the backoff given in `options` (here a constant 200 ms).
 *
 * The payload says how many attempts fail before one succeeds, to show retries.
 */
export const options = { backoff: "200ms" }

export default async function flaky(payload, job) {
  await new Promise((resolve) => setTimeout(resolve, 30 + (job.id * 13) % 90))
  if (job.attempt <= (payload.failures ?? 1)) {
    throw new Error(`simulated outage (attempt ${job.attempt} of ${job.maxAttempts})`)
  }
}
