/**
 * The longest a timer can wait (2^31 - 1 ms, about 24.8 days): a longer one fires after 1 ms
 * instead, so every duration in the config that the gateway waits on with a timer is at most this.
 */
export const MAX_TIMER_MS = 2_147_483_647;
