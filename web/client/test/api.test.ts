import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Api, ApiError } from '../src/api';
import { FakeParley, fakeUser } from './fakeserver';

let srv: FakeParley;

beforeEach(async () => {
	srv = new FakeParley();
	await srv.start();
	srv.users.set('U2', fakeUser('U2', 'bob'));
});

afterEach(async () => {
	await srv.stop();
});

describe('Api', () => {
	it('sends the bearer token and decodes the answer', async () => {
		const api = new Api({ baseUrl: srv.url + '/', token: 'T9' });
		const r = await api.usersBatch(['U2']);
		expect(r.users.map((u) => u.handle)).toEqual(['bob']);
		expect(srv.requestsTo('/api/v1/users/batch')[0].body).toEqual({ ids: ['U2'] });
	});

	it('retries a request that is safe to repeat after 503 and 429, honouring Retry-After', async () => {
		const api = new Api({ baseUrl: srv.url });
		srv.failNext.set('/api/v1/users/batch', [503, 429]);
		const r = await api.usersBatch(['U2']);
		expect(r.users).toHaveLength(1);
		expect(srv.requestsTo('/api/v1/users/batch')).toHaveLength(3);
	});

	it("gives up after the configured retries with the server's error", async () => {
		const api = new Api({ baseUrl: srv.url, retries: 1 });
		srv.failNext.set('/api/v1/users/batch', [503, 503, 503]);
		const err = await api.usersBatch(['U2']).catch((e) => e);
		expect(err).toBeInstanceOf(ApiError);
		expect([err.status, err.code, err.retryAfterMs]).toEqual([503, 'unavailable', 0]);
		expect(srv.requestsTo('/api/v1/users/batch')).toHaveLength(2);
	});

	it('does not retry what is not safe to repeat, nor client errors', async () => {
		const api = new Api({ baseUrl: srv.url });
		srv.failNext.set('/api/v1/workspaces', [503]);
		await expect(api.createWorkspace('X', 'x')).rejects.toMatchObject({ status: 503 });
		expect(srv.requestsTo('/api/v1/workspaces')).toHaveLength(1);
		const err = await api.getChannel('nope').catch((e) => e);
		expect([err.status, err.code]).toEqual([404, 'not_found']);
		expect(srv.requestsTo('/api/v1/channels/nope')).toHaveLength(1);
	});

	it('reports a failure in transit as status 0 and calls onUnauthorized on 401', async () => {
		let unauthorized = 0;
		const api = new Api({ baseUrl: 'http://127.0.0.1:9', retries: 0, onUnauthorized: () => unauthorized++ });
		const err = await api.me().catch((e) => e);
		expect([err.status, err.code]).toEqual([0, 'network']);
		const api2 = new Api({ baseUrl: srv.url, onUnauthorized: () => unauthorized++ });
		srv.failNext.set('/api/v1/me', [401]);
		await expect(api2.me()).rejects.toMatchObject({ status: 401 });
		expect(unauthorized).toBe(1);
	});
});
