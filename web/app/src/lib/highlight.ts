// Syntax highlighting for code blocks, a chunk of its own that CodeBlock.svelte
// loads when a code block with a language first comes into view. lowlight
// runs highlight.js and returns its result as a tree of plain objects (not
// HTML), which this flattens into tokens: a run of text and the highlight.js
// classes it is in. Components render tokens as text in <span>s, so the code
// stays text whatever it holds.
import { createLowlight } from 'lowlight';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import css from 'highlight.js/lib/languages/css';
import diff from 'highlight.js/lib/languages/diff';
import go from 'highlight.js/lib/languages/go';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';

const low = createLowlight({ bash, c, cpp, css, diff, go, java, javascript, json, python, rust, sql, typescript, xml, yaml });

/** A run of code and the classes (hljs-keyword …) it is highlighted with; '' for none. */
export type Token = { v: string; c: string };

// The parts of lowlight's (hast) tree that tokens need.
type Node = { type: string; value?: string; tagName?: string; properties?: { className?: unknown }; children?: Node[] };

const CLASS = /^hljs-[a-z0-9_-]{1,40}$/;

/** Whether a language name or alias (js, golang, sh …) can be highlighted. */
export function supported(lang: string): boolean {
	return low.registered(lang);
}

/** highlight returns the tokens of code in lang, or null if lang is unknown or it fails. */
export function highlight(lang: string, code: string): Token[] | null {
	if (!supported(lang)) return null;
	let root: Node;
	try {
		root = low.highlight(lang, code) as Node;
	} catch {
		return null;
	}
	const out: Token[] = [];
	const walk = (n: Node, cls: string, depth: number) => {
		if (n.type === 'text') {
			const v = n.value ?? '';
			const last = out[out.length - 1];
			if (last && last.c === cls) last.v += v;
			else if (v) out.push({ v, c: cls });
			return;
		}
		let here = cls;
		if (n.type === 'element') {
			const names = Array.isArray(n.properties?.className) ? n.properties.className : [];
			const own = names.filter((x): x is string => typeof x === 'string' && CLASS.test(x));
			if (own.length && depth < 8) here = [cls, ...own].filter(Boolean).join(' ');
		}
		for (const ch of n.children ?? []) walk(ch, here, depth + 1);
	};
	walk(root, '', 0);
	// Whatever the tree held, the tokens must spell the code exactly.
	return out.map((t) => t.v).join('') === code ? out : null;
}
