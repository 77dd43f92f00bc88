import { describe, expect, it } from 'vitest';
import { DraftStore, MAX_DRAFTS, MAX_DRAFT_CHARS, channelDraft, threadDraft, type DraftStorage } from './drafts.svelte';

class MemoryStorage implements DraftStorage {
	readonly data = new Map<string, string>();
	getItem(k: string) {
		return this.data.get(k) ?? null;
	}
	setItem(k: string, v: string) {
		this.data.set(k, v);
	}
	removeItem(k: string) {
		this.data.delete(k);
	}
}

function store(storage: DraftStorage | undefined, scope = { key: 'parley.drafts.U1.W1' as string | undefined }) {
	return {
		d: new DraftStore(
			() => storage,
			() => scope.key,
		),
		scope,
	};
}

describe('DraftStore', () => {
	it('keeps a draft per channel and per thread, across instances (a reload), and clears it on send', () => {
		const mem = new MemoryStorage();
		const { d } = store(mem);
		d.set(channelDraft('C1'), 'C1', 'half a thought');
		d.set(threadDraft('M1'), 'C2', 'a reply');
		expect(d.get(channelDraft('C1'))).toBe('half a thought');
		expect([d.has('C1'), d.has('C2'), d.has('C3')]).toEqual([true, true, false]);

		const again = store(mem).d;
		again.sync();
		expect(again.get(channelDraft('C1'))).toBe('half a thought');
		expect(again.get(threadDraft('M1'))).toBe('a reply');
		expect(again.has('C2')).toBe(true);

		again.clear(channelDraft('C1'));
		again.set(threadDraft('M1'), 'C2', '   ');
		expect(again.get(channelDraft('C1'))).toBe('');
		expect([again.has('C1'), again.has('C2')]).toEqual([false, false]);
		expect(mem.data.size).toBe(0);
	});

	it('is namespaced per user and workspace', () => {
		const mem = new MemoryStorage();
		const { d, scope } = store(mem);
		d.set(channelDraft('C1'), 'C1', 'in W1');
		scope.key = 'parley.drafts.U1.W2';
		d.sync();
		expect(d.get(channelDraft('C1'))).toBe('');
		expect(d.has('C1')).toBe(false);
		scope.key = undefined; // signed out: nothing kept, nothing read
		d.set(channelDraft('C1'), 'C1', 'nowhere');
		expect([...mem.data.keys()]).toEqual(['parley.drafts.U1.W1']);
	});

	it('caps the size: a draft is cut at a message length, the oldest drafts go first', () => {
		const mem = new MemoryStorage();
		const { d } = store(mem);
		d.set(channelDraft('C0'), 'C0', 'x'.repeat(MAX_DRAFT_CHARS + 10));
		expect(d.get(channelDraft('C0')).length).toBe(MAX_DRAFT_CHARS);
		for (let i = 1; i <= MAX_DRAFTS + 5; i++) d.set(channelDraft(`C${i}`), `C${i}`, `draft ${i}`);
		const kept = JSON.parse(mem.getItem('parley.drafts.U1.W1')!);
		expect(Object.keys(kept).length).toBe(MAX_DRAFTS);
		expect(d.get(channelDraft(`C${MAX_DRAFTS + 5}`))).toBe(`draft ${MAX_DRAFTS + 5}`);
	});

	it('tolerates corrupt storage, a full storage and no storage at all', () => {
		const mem = new MemoryStorage();
		mem.setItem('parley.drafts.U1.W1', '{broken');
		const { d } = store(mem);
		expect(d.get(channelDraft('C1'))).toBe('');
		d.set(channelDraft('C1'), 'C1', 'fresh start');
		expect(d.get(channelDraft('C1'))).toBe('fresh start');

		const full = new MemoryStorage();
		full.setItem = () => {
			throw new DOMException('full', 'QuotaExceededError');
		};
		const f = store(full).d;
		expect(() => f.set(channelDraft('C1'), 'C1', 'no room')).not.toThrow();
		expect(f.get(channelDraft('C1'))).toBe('');

		const none = store(undefined).d;
		expect(() => none.set(channelDraft('C1'), 'C1', 'x')).not.toThrow();
		expect(none.get(channelDraft('C1'))).toBe('');
	});
});
