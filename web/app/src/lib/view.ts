// Types shared by the app's components.
import type { Message, Presence, User } from '@parley/client';

/** A message as the list shows it: a server message or a local echo. */
export type ViewMessage = Message & { pending?: boolean; failed?: boolean; queued?: boolean; error?: string };

/** What a message row can ask of the app. */
export interface RowContext {
	selfId: string;
	selfHandle: string;
	user(id: string): User | undefined;
	presence(id: string): Presence | undefined;
	react(m: Message, emoji: string, add: boolean): void;
	openThread(m: Message): void;
	edit(m: Message, text: string): Promise<void>;
	remove(m: Message): Promise<void>;
	retry(m: ViewMessage): void;
	openProfile(userId: string): void;
	/** Pin or unpin a message (absent where rows cannot be pinned). */
	pin?(m: Message, pinned: boolean): void;
	/** The channel is archived: rows offer no actions that write. */
	readOnly?: boolean;
	/** The user may pin in the channel on screen (members; previews may not). */
	canPin?: boolean;
	/** Epoch ms for hiding statuses that ran out (reactive where the app provides it). */
	now?: number;
	/** A message to open for editing (↑ in an empty composer), and the call that takes the request. */
	readonly editRequest?: string | null;
	takeEditRequest?(): void;
	/** Copy a link to the message; false when the clipboard refused. */
	copyLink?(m: Message): Promise<boolean>;
}

/** A row of the virtualised list. */
export type Row = { kind: 'day'; key: string; label: string } | { kind: 'new'; key: string } | { kind: 'msg'; key: string; m: ViewMessage; grouped: boolean };
