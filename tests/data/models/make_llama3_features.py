#!/usr/bin/env python3
"""Write llama-gqa-tiny-ropefreqs-bias-f32.gguf: llama-gqa-tiny-f32.gguf with
two parts real Llama-family files carry that its graph must read:
  - rope_freqs.weight {n_rot/2}: Llama 3.1's RoPE frequency factors (1 for the
    fast pairs, up to 8 for the slow ones, a smooth ramp between, the shape of
    Llama 3.1's "llama3" scaling);
  - blk.N.attn_{q,k,v}.bias: biases on q, k and v (llama.cpp adds them on any
    architecture whose file has them).
Values are fixed formulas, so the file is the same on every run.

usage: make_llama3_features.py BASE.gguf OUT.gguf"""
import math
import struct
import sys

ALIGN = 32
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value type -> bytes


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.at)[0]
        self.at += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take('<Q')
        s = self.data[self.at:self.at + n]
        self.at += n
        return s

    def skip_value(self, vtype):
        if vtype == 8:
            self.string()
        elif vtype == 9:
            etype, n = self.take('<I'), self.take('<Q')
            if etype in SCALAR:
                self.at += SCALAR[etype] * n
            else:
                for _ in range(n):
                    self.skip_value(etype)
        else:
            self.at += SCALAR[vtype]


def main(base, out):
    data = open(base, 'rb').read()
    r = Reader(data)
    assert data[:4] == b'GGUF'
    r.at = 4
    version, n_tensors, n_kv = r.take('<I'), r.take('<Q'), r.take('<Q')
    kv_start = r.at
    n_rot = head_count = head_count_kv = embd = n_layer = None
    for _ in range(n_kv):
        key = r.string().decode()
        vtype = r.take('<I')
        if key in ('llama.rope.dimension_count', 'llama.attention.head_count', 'llama.attention.head_count_kv',
                   'llama.embedding_length', 'llama.block_count'):
            value = struct.unpack_from('<I', data, r.at)[0]
            if key.endswith('dimension_count'): n_rot = value
            elif key.endswith('head_count'): head_count = value
            elif key.endswith('head_count_kv'): head_count_kv = value
            elif key.endswith('embedding_length'): embd = value
            else: n_layer = value
        r.skip_value(vtype)
    kv_bytes = data[kv_start:r.at]
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        ndim = r.take('<I')
        ne = [r.take('<Q') for _ in range(ndim)]
        dtype, offset = r.take('<I'), r.take('<Q')
        tensors.append([name, ne, dtype, offset])
    data_start = (r.at + ALIGN - 1) // ALIGN * ALIGN
    ends = sorted(t[3] for t in tensors) + [len(data) - data_start]
    blobs = {t[0]: data[data_start + t[3]:data_start + ends[ends.index(t[3]) + 1]] for t in tensors}

    head_dim = embd // head_count
    n_rot = n_rot or head_dim
    half = n_rot // 2
    factors = [1.0 + 7.0 * (1.0 - math.cos(math.pi * max(0.0, min(1.0, (i - half / 4) / (half / 2))))) / 2.0
               for i in range(half)]
    extra = [(b'rope_freqs.weight', [half], struct.pack('<%df' % half, *factors))]
    for layer in range(n_layer):
        for part, rows in (('q', head_count * head_dim), ('k', head_count_kv * head_dim), ('v', head_count_kv * head_dim)):
            salt = {'q': 1.0, 'k': 2.0, 'v': 3.0}[part]
            values = [0.3 * math.sin(0.37 * i + salt + layer) for i in range(rows)]
            extra.append((b'blk.%d.attn_%s.bias' % (layer, part.encode()), [rows], struct.pack('<%df' % rows, *values)))
    for name, ne, blob in extra:
        tensors.append([name, ne, 0, 0])
        blobs[name] = blob

    body, table = b'', b''
    for t in tensors:
        body += b'\0' * ((-len(body)) % ALIGN)
        t[3] = len(body)
        body += blobs[t[0]]
    for name, ne, dtype, offset in tensors:
        table += struct.pack('<Q', len(name)) + name + struct.pack('<I', len(ne))
        table += b''.join(struct.pack('<Q', x) for x in ne) + struct.pack('<IQ', dtype, offset)
    head = b'GGUF' + struct.pack('<IQQ', version, len(tensors), n_kv) + kv_bytes + table
    head += b'\0' * ((-len(head)) % ALIGN)
    open(out, 'wb').write(head + body)


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2])
