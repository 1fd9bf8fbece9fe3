// The official Honcho SDK (@honcho-ai/sdk) performing, against
// checks/fake/honcho, each operation memoryd performs. Reads {url, key,
// workspace, ops} as JSON on stdin; each op is {op, call, args, key
// (instead of input's)}. Each op runs on a new client whose requests
// carry X-Boxmaker-Op, so the fake can group what each op sent (the SDK
// gets or creates the workspace, peer or session objects it needs on
// the way). Writes {results: [{op, ok, error}], answers: [{op, method,
// path, status, body}]} as JSON on stdout: answers are the fake's raw
// JSON, for the type checks.
'use strict';
const {Honcho} = require('@honcho-ai/sdk');

console.log = (...a) => console.error(...a);

const answers = [];
const realFetch = globalThis.fetch;
let current = '';
globalThis.fetch = async (url, init) => {
    const resp = await realFetch(url, init);
    const text = await resp.clone().text();
    answers.push({op: current, method: init?.method || 'GET', path: new URL(url).pathname, status: resp.status, body: text});
    return resp;
};

function read() {
    return new Promise((resolve) => {
        let s = '';
        process.stdin.on('data', (d) => { s += d; });
        process.stdin.on('end', () => resolve(JSON.parse(s)));
    });
}

async function run(input, o) {
    const h = new Honcho({baseURL: input.url, apiKey: o.key || input.key, workspaceId: input.workspace,
        maxRetries: 0, defaultHeaders: {'X-Boxmaker-Op': o.op}});
    const a = o.args || [];
    switch (o.call) {
    case 'workspace': return h._getOrCreateWorkspace(input.workspace, {});
    case 'peer': return (await h.peer(a[0])).id;
    case 'session': return (await h.session(a[0], {peers: a[1]})).id;
    case 'addPeers': return (await h.session(a[0])).addPeers(a[1]);
    case 'addMessages': {
        const s = await h.session(a[0]);
        const p = await h.peer(a[1]);
        return (await s.addMessages([p.message(a[2], {metadata: a[3]})])).length;
    }
    case 'messages': {
        const s = await h.session(a[0]);
        return (await s.messages({page: a[1], size: a[2], reverse: a[3]})).items.length;
    }
    case 'searchWorkspace': return (await h.search(a[0], {limit: a[1]})).length;
    case 'searchSession': return (await (await h.session(a[0])).search(a[1], {limit: a[2]})).length;
    case 'searchPeer': return (await (await h.peer(a[0])).search(a[1], {limit: a[2]})).length;
    case 'chat': return (await h.peer(a[0])).chat(a[1], {target: a[2], reasoningLevel: a[3]});
    case 'deleteSession': return (await h.session(a[0])).delete();
    default: throw new Error('unknown call ' + o.call);
    }
}

(async () => {
    const input = await read();
    const results = [];
    for (const o of input.ops) {
        current = o.op;
        try {
            results.push({op: o.op, ok: true, data: await run(input, o)});
        } catch (e) {
            results.push({op: o.op, ok: false, error: {name: e.constructor.name, message: e.message, status: e.status}});
        }
    }
    process.stdout.write(JSON.stringify({results, answers}));
    process.exit(0);
})();
