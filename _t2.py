import numpy as np, factorgraph as fg, time
rng=np.random.default_rng(0)
N,D=200,3
X=rng.normal(size=(N,D)); w0=np.array([0.5,-0.3,0.2]); e=rng.uniform(0.5,2,N)
y=rng.poisson(e*np.exp(X@w0))
with fg.Model("pr") as m:
    n=fg.plate("n",N)
    w=fg.mv_gaussian("w",mean=0.0,precision=1.0,dim=D)
    fg.poisson_log("y",fg.inner(X,w,plates=[n]),exposure=e,plates=[n],observed=y)
r=fg.infer(m,algorithm=fg.NCVMP(),tol=1e-14, max_iter=1000)
print(r.elbo, r.n_iter, r.converged, r.posterior("w").mean())
r2=fg.infer(m,algorithm=fg.NCVMP(), handlers={"w": fg.Laplace()}) if False else None
