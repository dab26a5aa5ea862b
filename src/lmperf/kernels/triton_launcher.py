"""Launching a Triton (or Gluon) kernel for one signature of its arguments without Triton's per-call work.

``kernel[grid](*args)`` binds every argument to the kernel's parameters, computes the specialization
key (dtypes, 16-byte alignment, integers equal to 1), looks the compiled kernel up, and for an
autotuned kernel first builds dicts of the arguments to find the tuned config; only then does the
compiled kernel's own launcher run. A caller that has fixed the signature (shapes, strides, dtypes,
alignments) gets the same answers every time. ``Launcher`` takes its first call through Triton,
which compiles (``compile_configs``) and autotunes, and keeps the compiled kernel and its grid;
later calls go straight to the compiled kernel's launcher. Keeping the signature fixed is the caller's promise:
each Launcher belongs to one plan of ``flash_attention``'s plan cache, whose key is that signature.

The compiled launcher asks the driver about every pointer it is given as a tensor
(``cuPointerGetAttribute``: is it a device address?) at every launch; the first call settled that,
so later calls pass each tensor's address as an integer, which the launcher takes as it is. A tensor
on another device then reaches the kernel unchecked (a fault, not Triton's ValueError): the plans
that own Launchers key on each input's device.

A kernel that reads by TMA takes host tensor descriptors. Triton encodes one (a driver call) for
every descriptor of every launch, in a Python loop over all the launch's arguments. With the
signature fixed, a descriptor differs from the last only in its base address, so a Launcher given
descriptor templates encodes each address once and passes the encoded descriptor after that.

Triton compiles an autotuned kernel's configs one after another, as the autotuner first times each:
24 for our FlashAttention's bf16 backward. ``compile_configs`` compiles them side by side in threads
first (compiling is mostly ptxas, a subprocess, and native code, which run in parallel in threads);
the autotuner then finds each config compiled, and times and picks as before. With 32 CPUs a first
forward + backward took 10.6 s where it took 26.2 s (bf16, d = 64) and 36.2 s where it took 77.5 s
(fp32, d = 128): notes/one-allocation.md, section 23.
"""

import os
from concurrent.futures import ThreadPoolExecutor

import triton
from triton import knobs

# Encoded descriptors a Launcher keeps, at most: a model's layers and steps reuse a few addresses
# per argument (the caching allocator hands the same blocks back), and each is about 200 bytes.
MAX_ENCODED = 1024


def _jit_function(kernel):
    """The JITFunction under autotune and heuristics wrappers."""
    while not isinstance(kernel, triton.runtime.jit.JITFunction):
        kernel = kernel.fn
    return kernel


def compile_configs(kernel, grid, args, constexprs) -> None:
    """Every config of an autotuned ``kernel`` compiled for ``args`` at once, in up to one thread per
    CPU this process may use (Triton's ``AsyncCompileMode``), where the autotuner is about to time
    them. Not where it has tuned this key already (it then compiles only the config it picked), nor
    where it caches its picks on disk (``cache_results``, which this project does not set: there a
    stored pick is read, and a missing one is timed with each config compiled in turn, as before).
    A config compiled before (in memory or in Triton's disk cache) is looked up, not compiled. A
    config that fails to compile is left to the autotuner, which compiles it again, meets the error
    and times it as never finishing, as it does without this. Other kernels: nothing to do."""
    if not isinstance(kernel, triton.runtime.Autotuner) or len(kernel.configs) < 2 or kernel.cache_results:
        return
    named = {k: v for k, v in {**dict(zip(kernel.arg_names, args)), **constexprs}.items() if k in kernel.arg_names}
    key = [named[k] for k in kernel.keys if k in named] + [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
    if tuple(key) in kernel.cache:  # the key as Autotuner.run makes it
        return
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    with ThreadPoolExecutor(min(len(kernel.configs), cpus)) as pool, triton.AsyncCompileMode(pool, ignore_errors=True):
        kernel.warmup(*args, grid=grid, **constexprs)


def over(template, x):
    """A tensor descriptor over x's storage: ``template``'s shape, strides, block and layout, as they
    were checked when it was made (its own base, if any, is not read)."""
    described = object.__new__(type(template))
    described.__dict__.update(template.__dict__, base=x)
    return described


def _encoder(launch, positions):
    """(the launch function under it, each descriptor's TMA metadata in order) where ``launch`` is
    Triton's wrapper that encodes tensor descriptors (triton.backends.nvidia.driver's
    ``wrap_handle_tensordesc``, Triton 3.6), its descriptors are at ``positions`` and each is read by
    TMA; None otherwise, and every call goes through that wrapper."""
    names = getattr(getattr(launch, "__code__", None), "co_freevars", ())
    if not {"launcher", "tensordesc_indices", "tensordesc_meta"} <= set(names):
        return None
    cells = dict(zip(names, (cell.cell_contents for cell in launch.__closure__)))
    metas = cells["tensordesc_meta"]
    if sorted(cells["tensordesc_indices"]) != list(positions) or not metas or None in metas:
        return None  # other descriptors than declared, or one lowered to a pointer (no TMA)
    return cells["launcher"], metas


class Launcher:
    """``kernel[grid](*args, **constexprs)`` for calls whose arguments share one signature.

    ``grid`` is a tuple, or a function of the launch's meta-parameters (an autotuned kernel's tile
    sizes), resolved once the autotuner has chosen. The positional ``args`` of a call are the
    kernel's run-time arguments in order, ahead of its constexpr parameters, which are bound here.
    ``descriptors`` maps an argument's position to a tensor descriptor without a base: at that
    position a call passes the tensor, and the kernel gets the descriptor over it. Under Triton's
    interpreter, and while a launch hook is installed (a profiler such as Proton), every call goes
    through Triton.
    """

    def __init__(self, kernel, grid, interpret: bool = False, descriptors: dict | None = None, **constexprs):
        self.kernel, self.grid, self.interpret, self.constexprs = kernel, grid, interpret, constexprs
        self.descriptors = dict(sorted((descriptors or {}).items()))
        self.compiled = None
        self.config = None  # an autotuned kernel's pick for this signature, after the first call

    def __call__(self, *args) -> None:
        if self.compiled is None or knobs.runtime.launch_enter_hook.calls:
            self._through_triton(self.described(args))
            return
        args = list(args)
        for i in self.pointers:
            args[i] = args[i].data_ptr()
        if self.metas:
            args = self.encoded(args)
        elif self.descriptors:  # descriptors Triton's own wrapper encodes (not read by TMA)
            args = self.described(args)
        self.launch(*self.grid_xyz, self.stream(self.device), *self.fixed, *args, *self.unbound)

    def described(self, args) -> tuple:
        """args with the tensor at each descriptor's position replaced by the descriptor over it."""
        return tuple(over(self.descriptors[i], x) if i in self.descriptors else x for i, x in enumerate(args))

    def encoded(self, args) -> list:
        """args as the compiled launcher takes them: each descriptor's tensor replaced by the encoded
        descriptor over its address and the descriptor's shape and strides, each address encoded once."""
        out, start = [], 0
        for (i, template), meta in zip(self.descriptors.items(), self.metas):
            out += args[start:i]
            key = (i, args[i].data_ptr())
            encoded = self.tensor_maps.get(key)
            if encoded is None:
                if len(self.tensor_maps) >= MAX_ENCODED:
                    self.tensor_maps.clear()
                encoded = self.tensor_maps[key] = tuple(self.encode(over(template, args[i]), meta))
            out += encoded
            start = i + 1
        out += args[start:]
        return out

    def _through_triton(self, args) -> None:
        if not self.interpret and self.compiled is None:
            compile_configs(self.kernel, self.grid, args, self.constexprs)
        compiled = self.kernel[self.grid](*args, **self.constexprs)
        self.config = getattr(self.kernel, "best_config", None)
        if self.interpret or self.compiled is not None:
            return
        grid = self.grid
        if callable(grid):  # an autotuned kernel's grid, from the config it chose
            grid = grid({**self.constexprs, **self.kernel.best_config.all_kwargs()})
        self.grid_xyz = (*grid, 1, 1)[:3]
        driver = triton.runtime.driver.active
        self.device, self.stream = driver.get_current_device(), driver.get_current_stream
        launcher = compiled.run
        # The launcher's own __call__ allocates scratch memory per call; kernels that need none (ours)
        # skip it. Its launch() takes, after the grid and stream: the function, the cooperative-grid
        # and PDL flags, the two scratch buffers, the metadata, the launch metadata and the two hooks.
        needs_scratch = launcher.global_scratch_size or launcher.profile_scratch_size
        self.launch = launcher if needs_scratch else launcher.launch
        # tensors passed as such (not as descriptors): from now on, as their addresses
        self.pointers = [i for i, x in enumerate(args) if hasattr(x, "data_ptr") and i not in self.descriptors]
        self.metas = None
        encoder = None if needs_scratch or not self.descriptors else _encoder(self.launch, self.descriptors)
        if encoder is not None:
            from triton.backends.nvidia.driver import make_tensordesc_arg

            self.launch, self.metas = encoder
            self.encode, self.tensor_maps = make_tensordesc_arg, {}
        flags = () if needs_scratch else (launcher.launch_cooperative_grid, launcher.launch_pdl, None, None)
        self.fixed = (compiled.function, *flags, compiled.packed_metadata, None, None, None)
        # the compiled launcher takes every parameter and ignores the constexpr ones, bound when compiled
        self.unbound = (None,) * (len(_jit_function(self.kernel).arg_names) - len(args))
        self.compiled = compiled
