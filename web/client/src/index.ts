// @parley/client — Parley's TypeScript client library: the HTTP API (Api),
// the gateway (Gateway) and framework-agnostic state (Session). It has no DOM
// framework dependency and runs in browsers and in node (pass a WebSocket
// implementation there).
//
// Typical use in the web app:
//
//   const session = new Session({ token });           // same origin
//   session.on('loggedOut', () => showLogin());
//   session.on('notify', (n) => notifyUser(n));         // mentions and DMs
//   const unsubscribe = session.subscribe((s) => (state = s));  // Svelte: $state.raw
//   await session.start(workspaceId, { channelId });   // boot + gateway
//   await session.openChannel(channelId);              // focus, history, read marker
//   await session.send(channelId, 'hello @bob');
//   session.setViewUsers('sidebar', dmPartnerIds);     // the users on screen, per part:
//   session.setViewUsers('messages', visibleAuthorIds); // presence_sub follows their union
//   session.api.search(workspaceId, 'query');          // any endpoint: session.api
//   session.setVisible(!document.hidden);               // the app feeds page signals:
//   session.online();                                   // the library adds no DOM listeners
//
// Account screens use an Api on its own: `new Api().signup({...})`, then
// hand the token to a Session.

export { Api, ApiError, newClientMsgId, RESUMABLE_OVER } from './api';
export type { ApiOptions, AuthResult, HistoryQuery, PageQuery, SwitcherResult } from './api';
export { Gateway, backoffDelay, retryAfterDelay, CLIENT_RECONNECT_CODE } from './gateway';
export type { GatewayEvents, GatewayOptions, GatewayStats, WebSocketCtor, WebSocketLike } from './gateway';
export { Session } from './session';
export { Outbox, OUTBOX_MAX, permanentFailure } from './outbox';
export type { OutboxDeps, OutboxStorage } from './outbox';
export { ViewSet, VIEW_SOURCES } from './viewset';
export type { ViewSetHost, ViewSetOptions } from './viewset';
export { typingKey } from './typing';
export { mentions } from './messages';
export type { ChannelView, LocalMessage, MessageList, SessionEvents, SessionNotification, SessionOptions, SessionState, ThreadList, TypingUser } from './state';
export type { Unsubscribe } from './emitter';
export * from './types';
