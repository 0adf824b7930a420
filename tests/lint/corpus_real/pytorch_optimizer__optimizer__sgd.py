import math

import torch

from pytorch_optimizer.base.exception import NoSparseGradientError
from pytorch_optimizer.base.optimizer import BaseOptimizer
from pytorch_optimizer.base.type import Closure, Defaults, Loss, ParamGroup, ParamsT
from pytorch_optimizer.optimizer.utils.foreach import (
    foreach_add_,
    foreach_lerp_,
    foreach_scalar_div_,
    group_tensors_by_device_and_dtype,
)
from pytorch_optimizer.optimizer.utils.gradient import get_global_gradient_norm


class AccSGD(BaseOptimizer):
    """Accelerated SGD with coupled short and long steps.

    Args:
        params: Parameters to optimize or dictionaries defining parameter groups.
        lr: Learning rate.
        kappa: Ratio of long to short step.
        xi: Statistical advantage parameter.
        constant: Any small constant under 1.
        weight_decay: Weight decay coefficient.
        maximize: Maximize the objective instead of minimizing it.
        foreach: Use batched tensor operations. `None` enables them for supported parameter groups.

    """

    _supports_compiled_foreach = True

    def __init__(
        self,
        params: ParamsT,
        lr: float | torch.Tensor = 1e-3,
        kappa: float = 1000.0,
        xi: float = 10.0,
        constant: float = 0.7,
        weight_decay: float = 0.0,
        maximize: bool = False,
        foreach: bool | None = None,
        **kwargs,
    ):
        self.validate_learning_rate(lr)
        self.validate_non_negative(kappa, 'kappa')
        self.validate_non_negative(xi, 'xi')
        self.validate_non_negative(weight_decay, 'weight_decay')
        self.validate_boundary(constant, boundary=1.0, bound_type='upper')

        self.maximize = maximize
        self.foreach = foreach

        defaults: Defaults = {
            'lr': lr,
            'kappa': kappa,
            'xi': xi,
            'constant': constant,
            'weight_decay': weight_decay,
            'foreach': foreach,
        }

        super().__init__(params, defaults)

    def __str__(self) -> str:
        return 'AccSGD'

    def init_group(self, group: ParamGroup, **kwargs) -> None:
        if 'step' not in group:
            group['step'] = 0

        for p in group['params']:
            if p.grad is None:
                continue

            grad = p.grad
            if grad.is_sparse:
                raise NoSparseGradientError(str(self))

            state = self.state[p]

            if len(state) == 0:
                state['momentum_buffer'] = p.clone()

    def _step_foreach(
        self,
        group: ParamGroup,
        params: list[torch.Tensor],
        grads: list[torch.Tensor],
        buffers: list[torch.Tensor],
    ) -> None:
        large_lr = group['lr'] * group['kappa'] / group['constant']
        alpha = 1.0 - (group['xi'] * group['constant'] ** 2 / group['kappa'])
        beta = 1.0 - alpha
        zeta = group['constant'] / (group['constant'] + beta)

        if self.maximize:
            torch._foreach_neg_(grads)

        self.apply_weight_decay_foreach(params, grads, group['lr'], group['weight_decay'], False, False)

        torch._foreach_mul_(buffers, (1.0 / beta) - 1.0)
        foreach_add_(buffers, grads, alpha=-large_lr)
        torch._foreach_add_(buffers, params)
        torch._foreach_mul_(buffers, beta)

        foreach_add_(params, grads, alpha=-group['lr'])
        torch._foreach_lerp_(params, buffers, weight=1.0 - zeta)

    @torch.no_grad()
    def step(self, closure: Closure = None) -> Loss:
        loss: Loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        for group in self.param_groups:
            self.init_group(group)
            group['step'] += 1

            if self.can_use_foreach(group, group.get('foreach', self.foreach)):
                params, grads, state = self.collect_trainable_params(
                    group, self.state, state_keys=['momentum_buffer']
                )
                for batch in group_tensors_by_device_and_dtype(params, grads, state):
                    self._step_foreach(group, batch['params'], batch['grads'], batch['momentum_buffer'])
                continue

            large_lr = group['lr'] * group['kappa'] / group['constant']
            alpha = 1.0 - (group['xi'] * group['constant'] ** 2 / group['kappa'])
            beta = 1.0 - alpha
            zeta = group['constant'] / (group['constant'] + beta)

            for p in group['params']:
                if p.grad is None:
                    continue

                grad = p.grad

                self.maximize_gradient(grad, maximize=self.maximize)

                state = self.state[p]

                self.apply_weight_decay(
                    p,
                    grad=grad,
                    lr=group['lr'],
                    weight_decay=group['weight_decay'],
                    weight_decouple=False,
                    fixed_decay=False,
                )

                buf = state['momentum_buffer']
                buf.mul_((1.0 / beta) - 1.0).add_(grad, alpha=-large_lr).add_(p).mul_(beta)

                p.add_(grad, alpha=-group['lr']).lerp_(buf, weight=1.0 - zeta)

        return loss


class SGDW(BaseOptimizer):
    """SGD with optional decoupled weight decay.

    Args:
        params: Parameters to optimize or dictionaries defining parameter groups.
        lr: Learning rate.
        momentum: Momentum factor.
        weight_decay: Weight decay coefficient.
        weight_decouple: Apply weight decay to parameters instead of adding it to the gradient.
        dampening: Dampening factor for momentum.
        nesterov: Use Nesterov momentum.
        foreach: Use batched tensor operations. `None` enables them for supported parameter groups.
        maximize: Maximize the objective instead of minimizing it.

    """

    _supports_compiled_foreach = True

    def __init__(
        self,
        params: ParamsT,
        lr: float | torch.Tensor = 1e-4,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        weight_decouple: bool = True,
        dampening: float = 0.0,
        nesterov: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        **kwargs,
    ):
        self.validate_learning_rate(lr)
        self.validate_range(momentum, 'momentum', 0.0, 1.0)
        self.validate_non_negative(weight_decay, 'weight_decay')

        self.maximize = maximize
        self.foreach = foreach

        defaults: Defaults = {
            'lr': lr,
            'momentum': momentum,
            'weight_decay': weight_decay,
            'weight_decouple': weight_decouple,
            'dampening': dampening,
            'nesterov': nesterov,
            'foreach': foreach,
        }

        super().__init__(params, defaults)

    def __str__(self) -> str:
        return 'SGDW'

    def init_group(self, group: ParamGroup, **kwargs) -> None:
        if 'step' not in group:
            group['step'] = 0

        for p in group['params']:
            if p.grad is None:
                continue

            grad = p.grad
            if grad.is_sparse:
                raise NoSparseGradientError(str(self))

    def _can_use_foreach(self, group: ParamGroup) -> bool:
        if group.get('foreach') is False:
            return False

        return self.can_use_foreach(group, group.get('foreach'))

    def _init_momentum_buffers(
        self,
        group: ParamGroup,
        params: list[torch.Tensor],
        grads: list[torch.Tensor] | tuple[torch.Tensor, ...],
    ) -> tuple[list[torch.Tensor], list[bool]]:
        buffers, first_steps = [], []
        if group['momentum'] > 0.0:
            for p, grad in zip(params, grads):
                state = self.state[p]
                first_step = 'momentum_buffer' not in state
                if first_step:
                    state['momentum_buffer'] = torch.empty_like(grad)
                buffers.append(state['momentum_buffer'])
                first_steps.append(first_step)

        return buffers, first_steps

    def _step_foreach(
        self,
        group: ParamGroup,
        params: list[torch.Tensor],
        grads: list[torch.Tensor] | tuple[torch.Tensor, ...],
        buffers: list[torch.Tensor],
        first_steps: list[bool],
    ) -> None:
        lr, momentum, dampening = group['lr'], group['momentum'], group['dampening']

        if self.maximize:
            torch._foreach_neg_(grads)

        self.apply_weight_decay_foreach(
            params=params,
            grads=grads,
            lr=lr,
            weight_decay=group['weight_decay'],
            weight_decouple=group['weight_decouple'],
            fixed_decay=False,
        )

        if momentum > 0.0:
            new_buffers = [buf for buf, first in zip(buffers, first_steps) if first]
            new_grads = [grad for grad, first in zip(grads, first_steps) if first]
            if new_buffers:
                torch._foreach_copy_(new_buffers, new_grads)

            existing_buffers = [buf for buf, first in zip(buffers, first_steps) if not first]
            existing_grads = [grad for grad, first in zip(grads, first_steps) if not first]
            if existing_buffers:
                torch._foreach_mul_(existing_buffers, momentum)
                torch._foreach_add_(existing_buffers, existing_grads, alpha=1.0 - dampening)

            grads = torch._foreach_add(grads, buffers, alpha=momentum) if group['nesterov'] else buffers

        foreach_add_(params, grads, alpha=-lr)

    def _step_per_param(self, group: ParamGroup) -> None:
        momentum = group['momentum']

        for p in group['params']:
            if p.grad is None:
                continue

            grad = p.grad

            self.maximize_gradient(grad, maximize=self.maximize)

            self.apply_weight_decay(
                p,
                grad=grad,
                lr=group['lr'],
                weight_decay=group['weight_decay'],
                weight_decouple=group['weight_decouple'],
                fixed_decay=False,
            )

            if momentum > 0.0:
                state = self.state[p]
                buf = state.get('momentum_buffer')
                if buf is None:
                    state['momentum_buffer'] = buf = grad.clone()
                else:
                    buf.mul_(momentum).add_(grad, alpha=1.0 - group['dampening'])

                grad = grad.add_(buf, alpha=momentum) if group['nesterov'] else buf

            p.add_(grad, alpha=-group['lr'])

    @torch.no_grad()
    def step(self, closure: Closure = None) -> Loss:
        loss: Loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        for group in self.param_groups:
            self.init_group(group)
            group['step'] += 1

            if self._can_use_foreach(group):
                params, grads, _ = self.collect_trainable_params(group, self.state)
                for tensors in group_tensors_by_device_and_dtype(params, grads):
                    buffers, first_steps = self._init_momentum_buffers(group, tensors['params'], tensors['grads'])
                    self._step_foreach(group, tensors['params'], tensors['grads'], buffers, first_steps)
            else:
                self._step_per_param(group)

        return loss


class ASGD(BaseOptimizer):
    """Adaptive SGD with estimation of the local smoothness (curvature).

    Args:
        params: Parameters to optimize or dictionaries defining parameter groups.
        lr: Learning rate.
        amplifier: Coefficient controlling the maximum learning rate growth per step.
        weight_decay: Weight decay coefficient.
        weight_decouple: Apply weight decay to parameters instead of adding it to the gradient.
        fixed_decay: Apply decoupled weight decay without scaling it by the learning rate.
        theta: Initial ratio of consecutive learning rates, updated after each step.
        dampening: Scale of the local smoothness bound on the learning rate.
        eps: Term added to denominator to improve numerical stability.
        maximize: Maximize the objective instead of minimizing it.
        foreach: Use batched tensor operations. `None` enables them for supported parameter groups.

    """

    _supports_compiled_foreach = True

    def __init__(
        self,
        params: ParamsT,
        lr: float | torch.Tensor = 1e-2,
        amplifier: float = 0.02,
        weight_decay: float = 0.0,
        weight_decouple: bool = True,
        fixed_decay: bool = False,
        theta: float = 1.0,
        dampening: float = 1.0,
        eps: float = 1e-5,
        maximize: bool = False,
        foreach: bool | None = None,
        **kwargs,
    ):
        self.validate_learning_rate(lr)
        self.validate_non_negative(amplifier, 'amplifier')
        self.validate_non_negative(weight_decay, 'weight_decay')
        self.validate_non_negative(eps, 'eps')

        self.maximize = maximize
        self.foreach = foreach

        defaults: Defaults = {
            'lr': lr,
            'foreach': foreach,
            'amplifier': amplifier,
            'weight_decay': weight_decay,
            'weight_decouple': weight_decouple,
            'fixed_decay': fixed_decay,
            'theta': theta,
            'dampening': dampening,
            'eps': eps,
        }

        super().__init__(params, defaults)

    def __str__(self) -> str:
        return 'ASGD'

    def init_group(self, group: ParamGroup, **kwargs) -> None:
        pass

    @staticmethod
    def get_norms_by_group(group: ParamGroup, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """Compute global parameter and gradient L2 norms for a parameter group."""
        p_norm = torch.zeros(1, dtype=torch.float32, device=device)

        if BaseOptimizer.can_use_foreach(group, group.get('foreach')):
            params = [p for p in group['params'] if p.grad is not None]
            grads = [p.grad for p in params]
            for batch in group_tensors_by_device_and_dtype(params, grads):
                squares = [norm.square().float() for norm in torch._foreach_norm(batch['params'])]
                p_norm.add_(torch.stack(squares).sum())
        else:
            for p in group['params']:
                if p.grad is not None:
                    p_norm.add_(p.norm().pow(2))

        p_norm.sqrt_()
        g_norm = get_global_gradient_norm([group], device).sqrt_()

        return p_norm, g_norm

    def _step_foreach(
        self, group: ParamGroup, params: list[torch.Tensor], grads: list[torch.Tensor]
    ) -> None:
        if self.maximize:
            torch._foreach_neg_(grads)
        self.apply_weight_decay_foreach(
            params, grads, group['lr'], group['weight_decay'], group['weight_decouple'], group['fixed_decay']
        )
        foreach_add_(params, grads, alpha=-group['lr'])

    @torch.no_grad()
    def step(self, closure: Closure = None) -> Loss:
        loss: Loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        for group in self.param_groups:
            if not group['params']:
                continue

            device = group['params'][0].device

            if 'prev_param_norm' not in group and 'prev_grad_norm' not in group:
                group['prev_param_norm'], group['prev_grad_norm'] = self.get_norms_by_group(group, device)

            group['curr_param_norm'], group['curr_grad_norm'] = self.get_norms_by_group(group, device)

            param_diff_norm: float = (group['curr_param_norm'] - group['prev_param_norm']).item()
            grad_diff_norm: float = (group['curr_grad_norm'] - group['prev_grad_norm']).item()

            new_lr: float = group['lr'] * math.sqrt(1 + group['amplifier'] * group['theta'])
            if param_diff_norm > 0 and grad_diff_norm > 0:
                new_lr = min(new_lr, param_diff_norm / (group['dampening'] * grad_diff_norm)) + group['eps']

            group['theta'] = new_lr / group['lr']
            group['lr'] = new_lr

            group['prev_param_norm'].copy_(group['curr_param_norm'])
            group['prev_grad_norm'].copy_(group['curr_grad_norm'])

            if self.can_use_foreach(group, group.get('foreach', self.foreach)):
                params, grads, _ = self.collect_trainable_params(group, self.state)
                for batch in group_tensors_by_device_and_dtype(params, grads):
                    self._step_foreach(group, batch['params'], batch['grads'])
                continue

            for p in group['params']:
                if p.grad is None:
                    continue

                grad = p.grad
                if grad.is_sparse:
                    raise NoSparseGradientError(str(self))

                self.maximize_gradient(grad, maximize=self.maximize)

                self.apply_weight_decay(
                    p=p,
                    grad=grad,
                    lr=group['lr'],
                    weight_decay=group['weight_decay'],
                    weight_decouple=group['weight_decouple'],
                    fixed_decay=group['fixed_decay'],
                )

                p.add_(grad, alpha=-new_lr)

        return loss


class SignSGD(BaseOptimizer):
    """Sign based SGD with optional momentum.

    Args:
        params: Parameters to optimize or dictionaries defining parameter groups.
        lr: Learning rate.
        momentum: Momentum factor. `0` gives SignSGD. Positive values give Signum.
        weight_decay: Weight decay coefficient.
        weight_decouple: Apply weight decay to parameters instead of adding it to the gradient.
        foreach: Use batched tensor operations. `None` enables them for supported parameter groups.
        maximize: Maximize the objective instead of minimizing it.

    """

    _supports_compiled_foreach = True

    def __init__(
        self,
        params: ParamsT,
        lr: float | torch.Tensor = 1e-3,
        momentum: float = 0.9,
        weight_decay: float = 0.0,
        weight_decouple: bool = True,
        foreach: bool | None = None,
        maximize: bool = False,
        **kwargs,
    ):
        self.validate_learning_rate(lr)
        self.validate_range(momentum, 'beta', 0.0, 1.0)
        self.validate_non_negative(weight_decay, 'weight_decay')

        self.maximize = maximize
        self.foreach = foreach

        defaults: Defaults = {
            'lr': lr,
            'momentum': momentum,
            'weight_decay': weight_decay,
            'weight_decouple': weight_decouple,
            'foreach': foreach,
        }

        super().__init__(params, defaults)

    def __str__(self) -> str:
        return 'SignSGD'

    def init_group(self, group: ParamGroup, **kwargs) -> None:
        if 'step' not in group:
            group['step'] = 0

        for p in group['params']:
            if p.grad is None:
                continue

            grad = p.grad
            if grad.is_sparse:
                raise NoSparseGradientError(str(self))

            state = self.state[p]

            if group['momentum'] > 0.0 and 'momentum_buffer' not in state:
                state['momentum_buffer'] = torch.zeros_like(p)

    def _can_use_foreach(self, group: ParamGroup) -> bool:
        if group.get('foreach') is False:
            return False

        return self.can_use_foreach(group, group.get('foreach'))

    def _step_foreach(
        self,
        group: ParamGroup,
        params: list[torch.Tensor],
        grads: list[torch.Tensor],
        momentum_buffers: list[torch.Tensor],
    ) -> None:
        lr = group['lr']

        if self.maximize:
            torch._foreach_neg_(grads)

        self.apply_weight_decay_foreach(
            params=params,
            grads=grads,
            lr=lr,
            weight_decay=group['weight_decay'],
            weight_decouple=group['weight_decouple'],
            fixed_decay=False,
        )

        if group['momentum'] > 0.0:
            torch._foreach_lerp_(momentum_buffers, grads, weight=1.0 - group['momentum'])
            grads = momentum_buffers

        updates = torch._foreach_sign(grads)
        foreach_add_(params, updates, alpha=-lr)

    def _step_per_param(self, group: ParamGroup) -> None:
        momentum = group['momentum']

        for p in group['params']:
            if p.grad is None:
                continue

            grad = p.grad

            self.maximize_gradient(grad, maximize=self.maximize)

            self.apply_weight_decay(
                p,
                grad=grad,
                lr=group['lr'],
                weight_decay=group['weight_decay'],
                weight_decouple=group['weight_decouple'],
                fixed_decay=False,
            )

            state = self.state[p]

            if momentum > 0.0:
                buf = state['momentum_buffer']
                buf.lerp_(grad, weight=1.0 - momentum)
            else:
                buf = grad

            p.add_(torch.sign(buf) if not torch.is_complex(buf) else torch.sgn(buf), alpha=-group['lr'])

    @torch.no_grad()
    def step(self, closure: Closure = None) -> Loss:
        loss: Loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        for group in self.param_groups:
            self.init_group(group)
            group['step'] += 1

            if self._can_use_foreach(group):
                state_keys = ['momentum_buffer'] if group['momentum'] > 0.0 else []
                params, grads, state_dict = self.collect_trainable_params(
                    group, self.state, state_keys=state_keys
                )
                for tensors in group_tensors_by_device_and_dtype(params, grads, state_dict):
                    self._step_foreach(group, tensors['params'], tensors['grads'], tensors.get('momentum_buffer', []))
            else:
                self._step_per_param(group)

        return loss


class SGDSaI(BaseOptimizer):
    """SGD with learning rate scaling from the initial gradient signal-to-noise ratio.

    Args:
        params: Parameters to optimize or dictionaries defining parameter groups.
        lr: Learning rate.
        momentum: Momentum factor.
        weight_decay: Weight decay coefficient.
        weight_decouple: Apply weight decay to parameters instead of adding it to the gradient.
        eps: Term added to denominator to improve numerical stability.
        maximize: Maximize the objective instead of minimizing it.
        foreach: Use batched tensor operations. `None` enables them for supported parameter groups.

    """

    _supports_compiled_foreach = True

    def __init__(
        self,
        params: ParamsT,
        lr: float | torch.Tensor = 1e-2,
        momentum: float = 0.9,
        weight_decay: float = 1e-2,
        weight_decouple: bool = True,
        eps: float = 1e-8,
        maximize: bool = False,
        foreach: bool | None = None,
        **kwargs,
    ):
        self.validate_learning_rate(lr)
        self.validate_range(momentum, 'momentum', 0.0, 1.0)
        self.validate_non_negative(weight_decay, 'weight_decay')
        self.validate_non_negative(eps, 'eps')

        self.maximize = maximize
        self.foreach = foreach

        defaults: Defaults = {
            'lr': lr,
            'foreach': foreach,
            'momentum': momentum,
            'weight_decay': weight_decay,
            'weight_decouple': weight_decouple,
            'eps': eps,
        }

        super().__init__(params, defaults)

    def __str__(self) -> str:
        return 'SGDSaI'

    def init_group(self, group: ParamGroup, **kwargs) -> None:
        if 'step' not in group:
            group['step'] = 0

        for p in group['params']:
            if p.grad is None:
                continue

            grad = p.grad
            if grad.is_sparse:
                raise NoSparseGradientError(str(self))

            state = self.state[p]

            if group['momentum'] > 0.0 and 'momentum_buffer' not in state:
                state['momentum_buffer'] = torch.zeros_like(p)

            if 'gsnr' not in state:
                sigma = grad.std().nan_to_num_() if grad.ndim > 1 and grad.size(0) != 1 else 0
                grad_norm = grad.norm()
                state['gsnr'] = grad_norm / (sigma + group['eps']) if sigma != 0.0 else grad_norm

    def _step_foreach(
        self,
        group: ParamGroup,
        params: list[torch.Tensor],
        grads: list[torch.Tensor],
        state: dict[str, list[torch.Tensor]],
    ) -> None:
        if self.maximize:
            torch._foreach_neg_(grads)

        if group['momentum'] > 0.0:
            buffers = state['momentum_buffer']
            torch._foreach_lerp_(buffers, grads, weight=1.0 - group['momentum'])
        else:
            buffers = grads

        self.apply_weight_decay_foreach(
            params, grads, group['lr'], group['weight_decay'], group['weight_decouple'], False
        )
        updates = torch._foreach_mul(buffers, state['gsnr'])
        foreach_add_(params, updates, alpha=-group['lr'])

    @torch.no_grad()
    def step(self, closure: Closure = None) -> Loss:
        loss: Loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        for group in self.param_groups:
            self.init_group(group)
            group['step'] += 1

            momentum: float = group['momentum']

            if self.can_use_foreach(group, group.get('foreach', self.foreach)):
                keys = ['gsnr', 'momentum_buffer'] if momentum > 0.0 else ['gsnr']
                params, grads, state = self.collect_trainable_params(group, self.state, state_keys=keys)
                for batch in group_tensors_by_device_and_dtype(params, grads, state):
                    self._step_foreach(group, batch['params'], batch['grads'], batch)
                continue

            for p in group['params']:
                if p.grad is None:
                    continue

                grad = p.grad

                self.maximize_gradient(grad, maximize=self.maximize)

                state = self.state[p]

                if momentum > 0.0:
                    buf = state['momentum_buffer']
                    buf.lerp_(grad, weight=1.0 - momentum)
                else:
                    buf = grad

                self.apply_weight_decay(
                    p,
                    grad=grad,
                    lr=group['lr'],
                    weight_decay=group['weight_decay'],
                    weight_decouple=group['weight_decouple'],
                    fixed_decay=False,
                )

                p.add_(buf, alpha=-group['lr'] * state['gsnr'])

        return loss


class VSGD(BaseOptimizer):
    """SGD with variational gradient estimates.

    Args:
        params: Parameters to optimize or dictionaries defining parameter groups.
        lr: Learning rate.
        ghattg: Prior variance ratio between ghat and g, Var(ghat_t-g_t)/Var(g_t-g_{t-1}).
        ps: Prior strength.
        tau1: Remember rate for the gamma parameters of g.
        tau2: Remember rate for the gamma parameter of ghat.
        weight_decay: Weight decay coefficient.
        weight_decouple: Apply weight decay to parameters instead of adding it to the gradient.
        eps: Term added to denominator to improve numerical stability.
        maximize: Maximize the objective instead of minimizing it.
        foreach: Use batched tensor operations. `None` enables them for supported parameter groups.

    """

    _supports_compiled_foreach = True

    def __init__(
        self,
        params: ParamsT,
        lr: float | torch.Tensor = 1e-1,
        ghattg: float = 30.0,
        ps: float = 1e-8,
        tau1: float = 0.81,
        tau2: float = 0.9,
        weight_decay: float = 0.0,
        weight_decouple: bool = True,
        eps: float = 1e-8,
        maximize: bool = False,
        foreach: bool | None = None,
        **kwargs,
    ):
        self.validate_learning_rate(lr)
        self.validate_non_negative(ghattg, 'ghattg')
        self.validate_non_negative(ps, 'ps')
        self.validate_non_negative(tau1, 'tau1')
        self.validate_non_negative(tau2, 'tau2')
        self.validate_non_negative(weight_decay, 'weight_decay')
        self.validate_non_negative(eps, 'eps')

        self.maximize = maximize
        self.foreach = foreach

        defaults: Defaults = {
            'lr': lr,
            'foreach': foreach,
            'tau1': tau1,
            'tau2': tau2,
            'pa2': 2.0 * ps + 1.0 + 1e-4,
            'pbg2': 2.0 * ps,
            'pbhg2': 2.0 * ghattg * ps,
            'weight_decay': weight_decay,
            'weight_decouple': weight_decouple,
            'eps': eps,
        }

        super().__init__(params, defaults)

    def __str__(self) -> str:
        return 'VSGD'

    def init_group(self, group: ParamGroup, **kwargs) -> None:
        if 'step' not in group:
            group['step'] = 0

        for p in group['params']:
            if p.grad is None:
                continue

            grad = p.grad
            if grad.is_sparse:
                raise NoSparseGradientError(str(self))

            state = self.state[p]

            if len(state) == 0:
                state['mug'] = torch.zeros_like(p)
                state['bg'] = torch.full_like(p, group['pbg2'])
                state['bhg'] = torch.full_like(p, group['pbhg2'])

    def _step_foreach(
        self,
        group: ParamGroup,
        params: list[torch.Tensor],
        grads: list[torch.Tensor],
        state: dict[str, list[torch.Tensor]],
        first_step: bool,
        rho1: float | torch.Tensor,
        rho2: float | torch.Tensor,
    ) -> None:
        if self.maximize:
            torch._foreach_neg_(grads)

        self.apply_weight_decay_foreach(
            params, grads, group['lr'], group['weight_decay'], group['weight_decouple'], False
        )

        bg, bhg, mugs = state['bg'], state['bhg'], state['mug']
        if first_step:
            sgs = [torch.full_like(p, group['pbg2'] / (group['pa2'] - 1.0)) for p in params]
            shgs = [torch.full_like(p, group['pbhg2'] / (group['pa2'] - 1.0)) for p in params]
        else:
            sgs = torch._foreach_div(bg, group['pa2'])
            shgs = torch._foreach_div(bhg, group['pa2'])

        previous = torch._foreach_mul(mugs, mugs)
        cross = torch._foreach_mul(mugs, 2.0)
        torch._foreach_mul_(mugs, shgs)
        torch._foreach_add_(mugs, torch._foreach_mul(grads, sgs))
        sums = torch._foreach_add(sgs, shgs)
        torch._foreach_div_(mugs, sums)

        variances = torch._foreach_mul(sgs, shgs)
        torch._foreach_div_(variances, sums)
        squares = torch._foreach_pow(mugs, 2)
        torch._foreach_add_(squares, variances)

        bg2 = torch._foreach_add(squares, group['pbg2'])
        torch._foreach_mul_(cross, mugs)
        torch._foreach_sub_(bg2, cross)
        torch._foreach_add_(bg2, previous)

        bhg2 = torch._foreach_add(squares, group['pbhg2'])
        cross = torch._foreach_mul(grads, 2.0)
        torch._foreach_mul_(cross, mugs)
        torch._foreach_sub_(bhg2, cross)
        torch._foreach_add_(bhg2, torch._foreach_pow(grads, 2))
        foreach_lerp_(bg, bg2, weight=rho1)
        foreach_lerp_(bhg, bhg2, weight=rho2)

        torch._foreach_sqrt_(squares)
        torch._foreach_add_(squares, group['eps'])
        foreach_scalar_div_(squares, group['lr'])
        torch._foreach_mul_(squares, mugs)
        torch._foreach_sub_(params, squares)

    @torch.no_grad()
    def step(self, closure: Closure = None) -> Loss:
        loss: Loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        for group in self.param_groups:
            self.init_group(group)
            group['step'] += 1

            pa2, pbg2, pbhg2 = group['pa2'], group['pbg2'], group['pbhg2']

            rho1: float = math.pow(group['step'], -group['tau1'])
            rho2: float = math.pow(group['step'], -group['tau2'])

            if self.can_use_foreach(group, group.get('foreach', self.foreach)):
                params, grads, state = self.collect_trainable_params(
                    group, self.state, state_keys=['mug', 'bg', 'bhg']
                )
                for batch in group_tensors_by_device_and_dtype(params, grads, state):
                    self._step_foreach(group, batch['params'], batch['grads'], batch, group['step'] == 1, rho1, rho2)
                continue

            for p in group['params']:
                if p.grad is None:
                    continue

                grad = p.grad

                self.maximize_gradient(grad, maximize=self.maximize)

                state = self.state[p]

                self.apply_weight_decay(
                    p,
                    grad=grad,
                    lr=group['lr'],
                    weight_decay=group['weight_decay'],
                    weight_decouple=group['weight_decouple'],
                    fixed_decay=False,
                )

                bg, bhg = state['bg'], state['bhg']

                if group['step'] == 1:
                    sg = pbg2 / (pa2 - 1.0)
                    shg = pbhg2 / (pa2 - 1.0)
                else:
                    sg = bg / pa2
                    shg = bhg / pa2

                mug = state['mug']
                mug_prev = mug.clone()

                mug.mul_(shg).add_(grad * sg).div_(sg + shg)

                sigg = (sg * shg) / (sg + shg)
                mug_sq = mug.pow(2).add_(sigg)

                bg2 = pbg2 + mug_sq - 2.0 * mug * mug_prev + mug_prev.pow(2)
                bhg2 = pbhg2 + mug_sq - 2.0 * grad * mug + grad.pow(2)

                bg.lerp_(bg2, weight=rho1)
                bhg.lerp_(bhg2, weight=rho2)

                p.add_(group['lr'] / mug_sq.sqrt().add_(group['eps']) * mug, alpha=-1.0)

        return loss
