
import os
os.environ['TORCHINDUCTOR_COMPILE_THREADS'] = '1'
os.environ['TORCHINDUCTOR_CACHE_DIR'] = '/tmp/tmp.KrPdvnaDJm/b/fz_config_11000/inductor-warm-2'
os.environ['_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR'] = '139803090406432'
os.environ.pop('TORCHDYNAMO_REPRO_AFTER', None)
os.environ.pop('TORCHDYNAMO_REPRO_LEVEL', None)

import torch
from torch import tensor, device
import torch.fx as fx
from torch._dynamo.testing import rand_strided
from math import inf
import torch._inductor.inductor_prims



import torch._dynamo.config
import torch._inductor.config
import torch._functorch.config
import torch.fx.experimental._config

torch._inductor.config.trace.enabled = False
torch._inductor.config.inplace_buffers = True
torch._inductor.config.deterministic = False
torch._inductor.config.comprehensive_padding = True
torch._inductor.config.trace.save_real_tensors = False
torch._inductor.config.triton.store_cubin = False
torch._functorch.config.functionalize_rng_ops = False
torch._functorch.config.fake_tensor_allow_unsafe_data_ptr_access = True
torch._functorch.config.unlift_effect_tokens = False
torch._functorch.config.selective_decompose = False



isolate_fails_code_str = None





if "__compile_source__" in globals():
    import inspect as __after_aot_inspect
    import linecache as __after_aot_linecache
    __after_aot_filename = __after_aot_inspect.currentframe().f_code.co_filename
    __after_aot_linecache.cache[__after_aot_filename] = (
        len(__compile_source__),
        None,
        __compile_source__.splitlines(True),
        __after_aot_filename,
    )
# torch version: 2.13.0+cpu
# torch cuda version: None
# torch git version: cf30153c4c131c8164ee7798e5022d810682e2cb


# torch.cuda.is_available()==False, no GPU info collected
torch._higher_order_ops.triton_kernel_wrap.kernel_side_table.reset_table()

from torch.nn import *
class Repro(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()



    def forward(self, primals_1, primals_3, tangents_1):
        mul_3 = torch.ops.aten.mul.Tensor(tangents_1, -0.599)
        mul_4 = torch.ops.aten.mul.Tensor(mul_3, -1.591);  mul_3 = None
        mul_5 = torch.ops.aten.mul.Tensor(mul_4, -1.866);  mul_4 = None
        permute = torch.ops.aten.permute.default(primals_1, [1, 0]);  primals_1 = None
        permute_1 = torch.ops.aten.permute.default(permute, [1, 0]);  permute = None
        mm = torch.ops.aten.mm.default(mul_5, permute_1);  permute_1 = None
        permute_2 = torch.ops.aten.permute.default(mul_5, [1, 0])
        mm_1 = torch.ops.aten.mm.default(permute_2, primals_3);  permute_2 = primals_3 = None
        sum_1 = torch.ops.aten.sum.dim_IntList(mul_5, [0], True);  mul_5 = None
        view = torch.ops.aten.view.default(sum_1, [8]);  sum_1 = None
        add_1 = torch.ops.aten.add.Tensor(tangents_1, mm);  tangents_1 = mm = None
        return (mm_1, view, add_1)

def load_args(reader):
    buf0 = reader.storage(None, 256)
    reader.tensor(buf0, (8, 8), is_leaf=True)  # primals_1
    buf1 = reader.storage(None, 64)
    reader.tensor(buf1, (2, 8), is_leaf=True)  # primals_3
    buf2 = reader.storage(None, 64)
    reader.tensor(buf2, (2, 8), is_leaf=True)  # tangents_1
load_args._version = 0
mod = Repro()
if __name__ == '__main__':
    from torch._dynamo.repro.after_aot import run_repro
    with torch.no_grad():
        run_repro(mod, load_args, accuracy=False, command='run', save_dir=None, tracing_mode='real', check_str=None)
        # To run it separately, do 
        # mod, args = run_repro(mod, load_args, accuracy=False, command='get_args', save_dir=None, tracing_mode='real', check_str=None)
        # mod(*args)