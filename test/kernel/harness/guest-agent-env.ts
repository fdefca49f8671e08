/**
 * The settings every whole-agent run in the QEMU guest shares: its HTTP endpoints on a free
 * loopback port, no retry within a test (one attempt is what the test judges), debug logs.
 */
export const GUEST_AGENT_ENV = {
  HTTP_HOST: '127.0.0.1',
  HTTP_PORT: '0',
  RETRY_INITIAL_SECONDS: '600',
  RETRY_MAX_SECONDS: '600',
  LOG_LEVEL: 'debug',
} as const;
