"""Launching a Triton (or Gluon) kernel for one signature of its arguments without Triton's per-call work.

``kernel[grid](*args)`` binds every argument to the kernel's parameters, computes the specialization
key (dtypes, 16-byte alignment, integers equal to 1), looks the compiled kernel up, and for an
autotuned kernel first builds dicts of the arguments to find the tuned config; only then does the
compiled kernel's own launcher run. A caller that has fixed the signature (shapes, strides, dtypes,
alignments) gets the same answers every time. ``Launcher`` takes its first call through Triton,
which compiles and autotunes as usual, and keeps the compiled kernel and its grid; later calls go
straight to the compiled kernel's launcher. Keeping the signature fixed is the caller's promise:
each Launcher belongs to one plan of ``flash_attention``'s plan cache, whose key is that signature.
"""

import triton
from triton import knobs


def _jit_function(kernel):
    """The JITFunction under autotune and heuristics wrappers."""
    while not isinstance(kernel, triton.runtime.jit.JITFunction):
        kernel = kernel.fn
    return kernel


class Launcher:
    """``kernel[grid](*args, **constexprs)`` for calls whose arguments share one signature.

    ``grid`` is a tuple, or a function of the launch's meta-parameters (an autotuned kernel's tile
    sizes), resolved once the autotuner has chosen. The positional ``args`` of a call are the
    kernel's run-time arguments in order, ahead of its constexpr parameters, which are bound here.
    Under Triton's interpreter, and while a launch hook is installed (a profiler such as Proton),
    every call goes through Triton.
    """

    def __init__(self, kernel, grid, interpret: bool = False, **constexprs):
        self.kernel, self.grid, self.interpret, self.constexprs = kernel, grid, interpret, constexprs
        self.compiled = None

    def __call__(self, *args) -> None:
        if self.compiled is None or knobs.runtime.launch_enter_hook.calls:
            self._through_triton(args)
            return
        self.launch(*self.grid_xyz, self.stream(self.device), *self.fixed, *args, *self.unbound)

    def _through_triton(self, args) -> None:
        compiled = self.kernel[self.grid](*args, **self.constexprs)
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
        flags = () if needs_scratch else (launcher.launch_cooperative_grid, launcher.launch_pdl, None, None)
        self.fixed = (compiled.function, *flags, compiled.packed_metadata, None, None, None)
        # the compiled launcher takes every parameter and ignores the constexpr ones, bound when compiled
        self.unbound = (None,) * (len(_jit_function(self.kernel).arg_names) - len(args))
        self.compiled = compiled
