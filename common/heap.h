/* The process heap, for long-running servers whose requests come in bursts
 * of large, short-lived trees (glibc's malloc; nothing under
 * AddressSanitizer, whose allocator replaces glibc's). */
#ifndef GQ_HEAP_H
#define GQ_HEAP_H

/* Give the free memory of every malloc arena back to the system: what a
 * burst of large trees leaves behind would otherwise stay resident for the
 * life of the process, counted against the container's memory limit. */
void gq_heap_trim(void);

/* At most n malloc arenas: glibc's default (8 per CPU) lets each server
 * thread keep its own arena's free memory, so the resident size after a
 * burst grows with the thread count, not with what is alive. */
void gq_heap_limit_arenas(int n);

#endif
