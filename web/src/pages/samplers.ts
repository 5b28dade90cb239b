// Samples of queue depth and node CPU taken every 5 s while the queues or nodes page is
// open, kept (the last 60 per queue or node) at module level so that they survive
// navigation within the app; they start when such a page is first opened.
import { SampleStore } from "../components/sparkline";

export const SAMPLE_MS = 5000;
export const queueDepth = new SampleStore(60);
export const queueUnacked = new SampleStore(60);
export const nodeCpu = new SampleStore(60);
export const samplingSince: { queues?: number; nodes?: number } = {};
