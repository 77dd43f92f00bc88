// The library's protocol lists against the server's registry. Go writes
// protocol.gen.json from protocol.go (and fails its own test when the file
// is stale), so a name added, renamed or dropped on either side fails here.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BROADCAST_MENTIONS, CLIENT_OPS, CloseCode, EVENT_TYPES, FATAL_CLOSE_CODES, SERVER_OPS, type ClientFrame, type ServerFrame } from '../src/types';

interface Registry {
	server_ops: string[];
	client_ops: string[];
	close_codes: { code: number; name: string; resumable: boolean; fatal: boolean }[];
	event_types: { type: string; kind: string; reserved: boolean }[];
	broadcast_mentions: string[];
}

const registry: Registry = JSON.parse(readFileSync(new URL('../src/protocol.gen.json', import.meta.url), 'utf8'));

// The frame unions and the op lists name the same ops: a type error (npm run
// check) if one side has an op the other lacks.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const serverOpsMatchFrames: Same<ServerFrame['op'], (typeof SERVER_OPS)[number]> = true;
const clientOpsMatchFrames: Same<ClientFrame['op'], (typeof CLIENT_OPS)[number]> = true;

const camel = (s: string) => s.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

describe('protocol lists', () => {
	it('has the ops of the registry, in its order', () => {
		expect(serverOpsMatchFrames && clientOpsMatchFrames).toBe(true);
		expect([...SERVER_OPS]).toEqual(registry.server_ops);
		expect([...CLIENT_OPS]).toEqual(registry.client_ops);
	});

	it('has the close codes of the registry, and gives up on the fatal ones', () => {
		const want = Object.fromEntries(registry.close_codes.map((c) => [camel(c.name), c.code]));
		expect({ ...CloseCode }).toEqual(want);
		const fatal = registry.close_codes.filter((c) => c.fatal).map((c) => c.code);
		expect([...FATAL_CLOSE_CODES].sort()).toEqual(fatal.sort());
	});

	it('has every event type clients may see, with its kind', () => {
		const want = Object.fromEntries(registry.event_types.map((e) => [e.type, e.kind]));
		expect({ ...EVENT_TYPES }).toEqual(want);
	});

	it('has the broadcast mentions', () => {
		expect([...BROADCAST_MENTIONS]).toEqual(registry.broadcast_mentions);
	});
});
