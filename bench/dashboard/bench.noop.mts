/** The dashboard-impact bench's task: does nothing, so the drain measures the queue. */
export default async (): Promise<void> => {}
