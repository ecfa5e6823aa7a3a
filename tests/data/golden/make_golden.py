#!/usr/bin/env python3
"""Write a golden file (the format of this folder's others) for a model, from
llama.cpp through a harness program that prints its raw logits as JSON (the
developers' oracle harness: `HARNESS MODEL eval -t N --kv f32 --fa off
--tokens ... [--topk K --full-last | --gen N]`): the same three sequences as
llama-gqa-tiny-f32.json (1, 7 and 40 tokens) and 32 greedy tokens after the
7-token one, 2 threads, f32 KV cache, flash attention off. Used for models
added after this folder was made; a development tool, not run by the tests.

usage: make_golden.py HARNESS MODEL.gguf OUT.json"""
import hashlib
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def harness_eval(harness, model, tokens, extra):
    cmd = [harness, model, 'eval', '-t', '2', '--kv', 'f32', '--fa', 'off',
           '--tokens', ','.join(map(str, tokens))] + extra
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def main(harness, model, out):
    template = json.load(open(os.path.join(HERE, 'llama-gqa-tiny-f32.json')))
    sequences = []
    for seq in template['sequences']:
        r = harness_eval(harness, model, seq['tokens'], ['--topk', '20', '--full-last'])
        top = r['last_topk']
        sequences.append({'name': seq['name'], 'tokens': seq['tokens'], 'argmax': r['argmax'],
                          'argmax_logit': r['argmax_logit'], 'argmax_gap': r['argmax_gap'],
                          'last_top20': top, 'last_top2_gap': top[0][1] - top[1][1],
                          'last_logits': r['last_logits']})
    prompt = template['greedy']['prompt']
    g = harness_eval(harness, model, prompt, ['--gen', '32'])
    digest = hashlib.sha256(open(model, 'rb').read()).hexdigest()
    golden = {'model': 'tests/data/models/' + os.path.basename(model), 'model_sha256': digest,
              'oracle': {'threads': 2, 'kv': 'f32', 'flash_attn': 'off',
                         'repack': 'on (llama.cpp default use_extra_bufts)'},
              'sequences': sequences,
              'greedy': {'prompt': prompt, 'n': 32, 'tokens': g['greedy'], 'text': g.get('greedy_text', '')}}
    with open(out, 'w') as f:
        json.dump(golden, f)


if __name__ == '__main__':
    main(*sys.argv[1:])
