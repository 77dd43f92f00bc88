import { describe, expect, it } from 'vitest';
import { dmOthers, dmTitle } from './people';

const names: Record<string, string> = { A: 'Alice Moreau', B: 'Bob Okafor', C: 'Carol Lindqvist', D: 'Dan Wu' };
const nameOf = (id: string) => names[id];

describe('dmTitle', () => {
	it('names a DM after the other person', () => {
		expect(dmTitle(['A', 'B'], 'A', nameOf)).toBe('Bob Okafor');
	});

	it('names a group DM after its other members, by name, without the user', () => {
		expect(dmTitle(['A', 'B', 'C', 'D'], 'A', nameOf)).toBe('Bob Okafor, Carol Lindqvist, Dan Wu');
		expect(dmTitle(['D', 'C', 'A', 'B'], 'A', nameOf)).toBe('Bob Okafor, Carol Lindqvist, Dan Wu');
		expect(dmTitle(['B', 'A', 'C'], 'C', nameOf)).toBe('Alice Moreau, Bob Okafor');
	});

	it('marks people not resolved yet', () => {
		expect(dmTitle(['A', 'X', 'B'], 'A', nameOf)).toBe('Bob Okafor, …');
	});

	it('names the DM with oneself', () => {
		expect(dmTitle(['A'], 'A', nameOf)).toBe('Alice Moreau (you)');
		expect(dmOthers(['A'], 'A')).toEqual(['A']);
		expect(dmOthers(undefined, '')).toEqual([]);
	});
});
