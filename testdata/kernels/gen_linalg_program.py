"""A program of the decompositions (eigh, eigvalsh, cholesky, svd, qr, einsum,
lu) for tests/ops/test_linalg.py: the forward program Paddle 3.3.1 builds
(op by op, with block.append_op: its Python linalg API needs PIR), and
Paddle's loss value and gradients w.r.t. its two inputs.

    FLAGS_enable_pir_api=0 /path/to/paddle/python testdata/kernels/gen_linalg_program.py

writes testdata/kernels/linalg_program.pb (the forward program) and
linalg_program.paddle.npz (feeds, loss, ga, gb).
"""
import os
import pathlib

os.environ["FLAGS_enable_pir_api"] = "0"

import numpy as np  # noqa: E402
import paddle  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
paddle.enable_static()
rng=np.random.default_rng(0)
def build(with_grad):
    main, start = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, start):
        blk=main.global_block()
        a=paddle.static.data('a',[2,3,3],'float64'); a.stop_gradient=False
        b=paddle.static.data('b',[4,3],'float64'); b.stop_gradient=False
        cnt=[0]
        def op(t, ins, outs, attrs):
            cnt[0]+=1
            o={k:[blk.create_var(name=f'{t}{cnt[0]}_{k}_{i}', dtype='float64' if k not in ('Pivots','Infos') else 'int32') for i in range(n)] for k,n in outs.items()}
            blk.append_op(type=t, inputs=ins, outputs=o, attrs=attrs); return o
        # s = a a^T: symmetric, positive definite for this a
        at=op('transpose2',{'X':[a]},{'Out':1,'XShape':1},{'axis':[0,2,1]})['Out'][0]
        s=op('matmul_v2',{'X':[a],'Y':[at]},{'Out':1},{})['Out'][0]
        eh=op('eigh',{'X':[s]},{'Eigenvalues':1,'Eigenvectors':1},{'UPLO':'L'})
        ev=op('eigvalsh',{'X':[s]},{'Eigenvalues':1,'Eigenvectors':1},{'UPLO':'U','is_test':False})
        ch=op('cholesky',{'X':[s]},{'Out':1},{'upper':False})
        sv=op('svd',{'X':[b]},{'U':1,'S':1,'VH':1},{'full_matrices':False})
        qr=op('qr',{'X':[b]},{'Q':1,'R':1},{'mode':'reduced'})
        es=op('einsum',{'Operands':[a,b]},{'Out':1,'InnerCache':2,'XShape':2},{'equation':'bij,kj->bik'})
        lu=op('lu',{'X':[at]},{'Out':1,'Pivots':1,'Infos':1},{'pivots':True})
        terms=[eh['Eigenvalues'][0], ev['Eigenvalues'][0], ch['Out'][0], sv['S'][0], qr['R'][0], es['Out'][0], lu['Out'][0], eh['Eigenvectors'][0]]
        red=[]
        for i,t in enumerate(terms):
            sq=op('elementwise_mul',{'X':[t],'Y':[t]},{'Out':1},{'axis':-1})['Out'][0] if i in (0,2,6,7) else t
            red.append(op('reduce_sum',{'X':[sq]},{'Out':1},{'reduce_all':True,'dim':[],'keep_dim':False})['Out'][0])
        loss=op('sum',{'X':red},{'Out':1},{})['Out'][0]
        grads = paddle.static.gradients([loss],[a,b]) if with_grad else None
    return main, loss, grads
feed={'a':rng.standard_normal((2,3,3)),'b':rng.standard_normal((4,3))}
main, loss, (ga, gb) = build(True)
exe=paddle.static.Executor(paddle.CPUPlace())
vals=exe.run(main, feed=feed, fetch_list=[loss, ga, gb])
np.savez(HERE / 'linalg_program.paddle.npz', **feed, loss=vals[0], ga=vals[1], gb=vals[2])
main, loss, _ = build(False)
(HERE / 'linalg_program.pb').write_bytes(main.desc.serialize_to_string())
print('loss var', loss.name, 'value', vals[0])
