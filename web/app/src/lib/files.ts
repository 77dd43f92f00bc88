// Small helpers of the file views.

/** A byte count as people read it: 512 B, 14 KB, 3.2 MB. */
export function fileSize(n: number): string {
	if (n < 1024) return `${n} B`;
	if (n < 1 << 20) return `${Math.round(n / 1024)} KB`;
	if (n < 1 << 30) return `${(n / (1 << 20)).toFixed(1)} MB`;
	return `${(n / (1 << 30)).toFixed(1)} GB`;
}
