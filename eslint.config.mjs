import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      '**/node_modules/**',
      '**/lib/**',
      'coverage/**',
      '**/generated/**',
      'packages/*/labextension/**',
      'packages/*/build/**',
      'packages/lab-app/.build/**'
    ]
  },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }
      ],
      eqeqeq: ['error', 'smart'],
      curly: 'error',
      '@typescript-eslint/no-namespace': 'off'
    }
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    rules: { '@typescript-eslint/no-require-imports': 'off' }
  },
  {
    // The gateway runs the accelerator vocabulary in Node: it imports no package (no JupyterLab,
    // no lumino, nothing that needs a DOM), only its own modules and the REST contract's types.
    files: ['packages/accelerator-vocabulary/src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(?!\\./|@ferry/rest-contract$)',
              message:
                '@ferry/accelerator-vocabulary imports no package but the REST types (@ferry/rest-contract): the gateway and the browser both run it.'
            }
          ]
        }
      ]
    }
  }
);
